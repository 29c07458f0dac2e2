import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.js';
import type { ControlEvent } from '../src/control/events.js';
import { issueKey } from '../src/control/keys.js';
import { PostgresControlStore } from '../src/control/postgres.js';
import { buildService } from '../src/node.js';
import { logSink, rememberSecret } from './support/logs.js';
import { freshControlUrl } from './support/postgres.js';
import { client } from './support/server.js';

/**
 * A key lookup that read the key live, and answers only after this node heard the key's revocation, must not
 * leave the revoked key remembered. One node in this process (so that a test hook can hold its lookup back) and
 * a second store revoking as another node would, on one PostgreSQL (a few seconds).
 */

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A gate the node's lookups wait at (after PostgreSQL answered them), one lookup at a time. */
class LookupGate {
  private held: { reached: () => void; release: Promise<void> } | undefined;

  /** Holds the next lookup: `reached` resolves once it waits, and `release` lets it go. */
  holdNext(): { reached: Promise<void>; release: () => void } {
    const waiting = signal();
    const release = signal();
    this.held = { reached: waiting.fire, release: release.fired };
    return { reached: waiting.fired, release: release.fire };
  }

  readonly hook = async (): Promise<void> => {
    const held = this.held;
    if (held === undefined) return;
    this.held = undefined;
    held.reached();
    await held.release;
  };
}

/** A promise and the function that resolves it. */
function signal(): { fired: Promise<void>; fire: () => void } {
  // Replaced at once: a promise's executor runs before the constructor returns.
  let fire = (): void => undefined;
  const fired = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { fired, fire };
}

describe('a key revoked while a node looks it up', () => {
  let url: string;
  let node: PostgresControlStore;
  let other: PostgresControlStore;
  let app: FastifyInstance;
  const gate = new LookupGate();

  beforeAll(async () => {
    const controlUrl = await freshControlUrl();
    const dataDir = mkdtempSync(join(tmpdir(), 'strata-key-races-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    node = await PostgresControlStore.open(controlUrl, { testHoldKeyLookup: gate.hook });
    other = await PostgresControlStore.open(controlUrl);
    cleanups.push(() => other.close());
    const config = loadConfig({ STRATA_DATA_DIR: dataDir, STRATA_PORT: '0', STRATA_CONTROL_URL: controlUrl });
    app = await buildService({ config, store: node, logStream: logSink });
    await app.listen({ host: '127.0.0.1', port: 0 });
    cleanups.push(() => app.close());
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    url = `http://127.0.0.1:${address.port}`;
  });

  /** Resolves when this node has handled the revocation notice of the key of that hash. */
  const heard = (hash: string) =>
    new Promise<void>((resolve) => {
      const off = node.events.on((event: ControlEvent) => {
        if (event.kind === 'key_revoked' && event.hash === hash) {
          off();
          resolve();
        }
      });
    });

  test('a lookup that started before the revocation and answers after it does not bring the key back', async () => {
    const key = await issueKey(other, 'acme');
    rememberSecret(key.secret);
    const api = client(url, `Bearer ${key.secret}`);
    const hash = (await other.listKeys()).find((k) => k.id === key.id)?.hash ?? '';

    const hold = gate.holdNext();
    const inFlight = api.get('/v1/databases');
    await hold.reached;
    const noticed = heard(hash);
    expect(await other.revokeKey(key.id, Date.now())).toBe(true);
    await noticed;
    hold.release();
    // It proved the key before the revocation: its answer may stand.
    expect((await inFlight).status).toBe(200);

    const after = await api.get('/v1/databases');
    expect(after.status).toBe(401);
  });

  test('a key remembered before its revocation is refused once the notice arrives', async () => {
    const key = await issueKey(other, 'acme');
    rememberSecret(key.secret);
    const api = client(url, `Bearer ${key.secret}`);
    const hash = (await other.listKeys()).find((k) => k.id === key.id)?.hash ?? '';
    expect((await api.get('/v1/databases')).status).toBe(200);
    expect((await api.get('/v1/databases')).status).toBe(200);

    const noticed = heard(hash);
    expect(await other.revokeKey(key.id, Date.now())).toBe(true);
    await noticed;

    expect((await api.get('/v1/databases')).status).toBe(401);
  });
});
