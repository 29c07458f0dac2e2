import { type DatabaseSummary, type Strata, StrataError, type VerifyReply } from '@strata/client';
import { useEffect, useState } from 'preact/hooks';
import { ErrorNote } from '../components/error';
import { useFocusOnShow } from '../components/focus';
import { duration } from '../format';
import { hrefOf } from '../route';
import { RegisterForm } from './register';

/** The account's databases with their state; register, verify and delete them. */
export function DatabasesPanel({ strata }: { strata: Strata }) {
  const [databases, setDatabases] = useState<DatabaseSummary[] | undefined>(undefined);
  const [externalId, setExternalId] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [verified, setVerified] = useState<VerifyReply | undefined>(undefined);
  const [deleting, setDeleting] = useState<string | undefined>(undefined);
  const reload = async (): Promise<DatabaseSummary[]> => {
    try {
      const list = await strata.databases.list();
      setDatabases(list);
      if (list[0] !== undefined) setExternalId(list[0].external_id);
      return list;
    } catch (err) {
      setError(err);
      return [];
    }
  };
  useEffect(() => {
    void reload();
  }, [strata]);
  const verify = async (name: string) => {
    setError(undefined);
    setVerified(undefined);
    try {
      setVerified(await strata.databases.verify(name));
    } catch (err) {
      setError(err);
      // A failed verification says which step failed and how each went: shown as a passed one is.
      const checks = err instanceof StrataError ? err.details.checks : undefined;
      if (Array.isArray(checks)) {
        setVerified({ name, state: 'verify_failed', checks: checks as VerifyReply['checks'] });
      }
    }
    // A verified database turns active by itself once a worker is placed, within a second or so here.
    for (let tries = 0; tries < 20; tries++) {
      const list = await reload();
      if (list.find((db) => db.name === name)?.state !== 'activating') break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  };
  return (
    <section class="panel" aria-labelledby="databases-title">
      <div class="panel-head">
        <h1 id="databases-title">Databases</h1>
        <button type="button" onClick={() => void reload()}>
          Refresh
        </button>
      </div>
      <ErrorNote error={error} />
      {databases === undefined ? (
        <p class="muted">Loading…</p>
      ) : databases.length === 0 ? (
        <p class="muted">No database yet: register one below.</p>
      ) : (
        <div class="grid-wrap">
          <table class="grid databases">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Registered</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {databases.map((db) => (
                <tr key={db.name} data-database={db.name}>
                  <td>
                    <a href={hrefOf({ view: 'database', db: db.name })}>{db.name}</a>
                  </td>
                  <td>
                    <span class={`state state-${db.state}`}>{db.state}</span>
                  </td>
                  <td>{new Date(db.created_ms).toLocaleString()}</td>
                  <td class="actions">
                    <button type="button" onClick={() => void verify(db.name)}>
                      Verify
                    </button>
                    <button type="button" class="danger" onClick={() => setDeleting(db.name)}>
                      Delete…
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {verified === undefined ? null : <VerifyChecks reply={verified} />}
      {deleting === undefined ? null : (
        <DeleteDatabase
          strata={strata}
          name={deleting}
          onDone={() => {
            setDeleting(undefined);
            void reload();
          }}
        />
      )}
      {externalId === undefined ? null : (
        <p class="external-id">
          External id of this account, for the trust policy of an S3 role (<code>sts:ExternalId</code>):{' '}
          <code data-external-id>{externalId}</code>
        </p>
      )}
      <RegisterForm
        strata={strata}
        onRegistered={(registered) => {
          setExternalId(registered.external_id);
          void reload();
        }}
      />
    </section>
  );
}

function VerifyChecks({ reply }: { reply: VerifyReply }) {
  return (
    <div class="verify" aria-live="polite">
      <h2>
        {reply.state === 'verify_failed' ? 'Verification of' : 'Verified'} {reply.name}: now {reply.state}
      </h2>
      <table class="grid checks">
        <thead>
          <tr>
            <th scope="col">Step</th>
            <th scope="col">Result</th>
            <th scope="col">Time</th>
            <th scope="col">Note</th>
          </tr>
        </thead>
        <tbody>
          {reply.checks.map((check) => (
            <tr key={check.step} data-step={check.step}>
              <td>{check.step}</td>
              <td class={check.ok ? 'ok' : 'warn'}>{check.ok ? 'ok' : 'not ok'}</td>
              <td class="num">{duration(check.ms)}</td>
              <td>{check.note ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Deleting asks for the name typed out: one click must never remove a database. */
function DeleteDatabase({ strata, name, onDone }: { strata: Strata; name: string; onDone: () => void }) {
  const confirmInput = useFocusOnShow<HTMLInputElement>();
  const [typed, setTyped] = useState('');
  const [purge, setPurge] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    try {
      await strata.databases.delete(name, { purge });
      onDone();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="confirm" onSubmit={submit} aria-labelledby="delete-title">
      <h2 id="delete-title">Delete database {name}</h2>
      <p>
        Its catalog goes at once, on every node. With purge, the table files it created in the bucket are deleted too;
        without, they stay.
      </p>
      <label for="delete-confirm">
        Type <code>{name}</code> to confirm
      </label>
      <input
        id="delete-confirm"
        ref={confirmInput}
        autocomplete="off"
        value={typed}
        onInput={(event) => setTyped(event.currentTarget.value)}
      />
      <label class="check">
        <input type="checkbox" checked={purge} onChange={(event) => setPurge(event.currentTarget.checked)} /> Also purge
        its table files from the bucket
      </label>
      <div class="actions">
        <button type="submit" class="danger" disabled={typed !== name || busy}>
          Delete {name}
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      <ErrorNote error={error} />
    </form>
  );
}
