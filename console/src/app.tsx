import type { Strata } from '@strata/client';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { DatabasePanel } from './panels/database';
import { DatabasesPanel } from './panels/databases';
import { SearchPanel } from './panels/search';
import { SignIn } from './panels/signin';
import { SqlPanel } from './panels/sql';
import { TablePanel } from './panels/table';
import { hrefOf, type Route, useRoute } from './route';
import { clientOf, forgetKey, storedKey, storeKey } from './session';

export function App() {
  const [key, setKey] = useState(storedKey);
  const strata = useMemo(() => (key === undefined ? undefined : clientOf(key)), [key]);
  const route = useRoute();
  useEffect(() => {
    document.title = key === undefined ? 'Sign in · Strata console' : `${titleOf(route)} · Strata console`;
  }, [key, route]);
  const signOut = () => {
    forgetKey();
    setKey(undefined);
  };
  return (
    <>
      <header class="top">
        <a class="brand" href="#/">
          Strata console
        </a>
        {strata === undefined ? null : (
          <button type="button" class="sign-out" onClick={signOut}>
            Sign out
          </button>
        )}
      </header>
      <main id="main">
        {strata === undefined ? (
          <SignIn
            onSignedIn={(accepted) => {
              storeKey(accepted);
              setKey(accepted);
            }}
          />
        ) : (
          <>
            <Crumbs route={route} />
            <View route={route} strata={strata} />
          </>
        )}
      </main>
    </>
  );
}

function View({ route, strata }: { route: Route; strata: Strata }) {
  switch (route.view) {
    case 'databases':
      return <DatabasesPanel strata={strata} />;
    case 'database':
      return <DatabasePanel key={route.db} strata={strata} db={route.db} />;
    case 'table':
      return <TablePanel key={`${route.db}/${route.table}`} strata={strata} db={route.db} table={route.table} />;
    case 'search':
      return <SearchPanel key={route.db} strata={strata} db={route.db} />;
    case 'sql':
      return <SqlPanel key={route.db} strata={strata} db={route.db} />;
  }
}

function titleOf(route: Route): string {
  switch (route.view) {
    case 'databases':
      return 'Databases';
    case 'database':
      return route.db;
    case 'table':
      return `${route.db} / ${route.table}`;
    case 'search':
      return `Search ${route.db}`;
    case 'sql':
      return `SQL ${route.db}`;
  }
}

/** Where the view sits, and the database's other views one step away. */
function Crumbs({ route }: { route: Route }) {
  if (route.view === 'databases') return null;
  const { db } = route;
  const tab = (to: Route, label: string) => (
    <a href={hrefOf(to)} aria-current={route.view === to.view ? 'page' : undefined}>
      {label}
    </a>
  );
  return (
    <nav class="crumbs" aria-label="Database">
      <a href="#/">Databases</a>
      <span aria-hidden="true">/</span>
      <strong>{db}</strong>
      <span class="tabs">
        {tab({ view: 'database', db }, 'Tables')}
        {tab({ view: 'search', db }, 'Search')}
        {tab({ view: 'sql', db }, 'SQL')}
      </span>
    </nav>
  );
}
