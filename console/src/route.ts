import { useEffect, useState } from 'preact/hooks';

/**
 * Where the user is, kept in the URL's fragment: the back button works and a view can be bookmarked, and the
 * fragment never leaves the browser, so nothing of it reaches a server or its logs.
 */
export type Route =
  | { view: 'databases' }
  | { view: 'database'; db: string }
  | { view: 'table'; db: string; table: string }
  | { view: 'search'; db: string }
  | { view: 'sql'; db: string };

export function parseRoute(hash: string): Route {
  const parts = hash
    .replace(/^#\/?/, '')
    .split('/')
    .filter((part) => part !== '')
    .map((part) => decodeURIComponent(part));
  const [first, db, third, table] = parts;
  if (first !== 'db' || db === undefined) return { view: 'databases' };
  if (third === 't' && table !== undefined) return { view: 'table', db, table };
  if (third === 'search') return { view: 'search', db };
  if (third === 'sql') return { view: 'sql', db };
  return { view: 'database', db };
}

export function hrefOf(route: Route): string {
  const at = (...parts: string[]) => `#/${parts.map(encodeURIComponent).join('/')}`;
  switch (route.view) {
    case 'databases':
      return '#/';
    case 'database':
      return at('db', route.db);
    case 'table':
      return at('db', route.db, 't', route.table);
    case 'search':
      return at('db', route.db, 'search');
    case 'sql':
      return at('db', route.db, 'sql');
  }
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const changed = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}
