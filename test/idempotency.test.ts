import { beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { fingerprintOf } from '../src/engine/writes/service.js';
import { activeLocalDatabase, serveFile } from './support/server.js';
import { ARROW, ipcOf, type Row, tablesOf } from './support/tables.js';

const { strata, api } = serveFile(
  { STRATA_IDEMPOTENCY_TTL_MS: '1500', STRATA_IDEMPOTENCY_HOLD_MS: '150' },
  { database: 'idem' },
);
const db = tablesOf(api, 'idem');

beforeAll(async () => {
  await activeLocalDatabase(api, 'other');
  for (const d of [db, tablesOf(api, 'other')]) {
    const created = await d.create({
      table_name: 'items',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'utf8' },
      ],
    });
    expect(created.status).toBe(200);
  }
});

let keyNo = 0;
const newKey = () => `key-${Date.now()}-${keyNo++}`;

/** A write with an Idempotency-Key, answered as JSON. */
function send(path: string, key: string, body?: unknown, database = 'idem') {
  return api.request<Record<string, unknown>>('POST', `/v1/${path.replace('{db}', database)}`, body, {
    'idempotency-key': key,
    accept: 'application/json',
  });
}

const rows = async (where = 'true', database = 'idem'): Promise<Row[]> =>
  (
    await api.request<{ data: Row[] }>(
      'POST',
      `/v1/query_sql/${database}`,
      { query: `SELECT id::INTEGER AS id, v FROM items WHERE ${where} ORDER BY id, v` },
      { accept: 'application/json' },
    )
  ).json.data;

describe('Idempotency-Key', () => {
  test('an append sent again with its key writes nothing and answers what the first answered', async () => {
    const key = newKey();
    const body = {
      data: [
        { id: 1, v: 'one' },
        { id: 2, v: 'two' },
      ],
    };

    const first = await send('append/{db}?table=items', key, body);
    const again = await send('append/{db}?table=items', key, body);

    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('x-strata-table-version')).toBe(first.headers.get('x-strata-table-version'));
    expect(again.json).toEqual(first.json);
    expect(await rows('id IN (1, 2)')).toEqual([
      { id: 1, v: 'one' },
      { id: 2, v: 'two' },
    ]);
  });

  test('an update and a delete sent again answer their first counts and change nothing more', async () => {
    await db.append('items', [
      { id: 10, v: 'a' },
      { id: 11, v: 'b' },
    ]);
    const updateKey = newKey();
    const path = `update/{db}?table=items&predicate=${encodeURIComponent('id = 10')}`;
    const update = await send(path, updateKey, { data: [{ id: 12, v: 'moved' }] });
    const updateAgain = await send(path, updateKey, { data: [{ id: 12, v: 'moved' }] });

    expect(update.json).toEqual({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
    // Sent without its key, the same update now matches nothing (its row became id 12): 409.
    expect(updateAgain.status).toBe(200);
    expect(updateAgain.json).toEqual(update.json);
    expect(updateAgain.headers.get('idempotent-replayed')).toBe('true');

    const deleteKey = newKey();
    const remove = await send(`delete/{db}?table=items&predicate=${encodeURIComponent('id = 11')}`, deleteKey);
    const removeAgain = await send(`delete/{db}?table=items&predicate=${encodeURIComponent('id = 11')}`, deleteKey);

    expect(remove.json).toEqual({ matched: 1, n_tombstoned: 1, n_not_found: 0 });
    expect(removeAgain.json).toEqual(remove.json);
    expect(removeAgain.headers.get('x-strata-table-version')).toBe(remove.headers.get('x-strata-table-version'));
    expect(await rows('id BETWEEN 10 AND 12')).toEqual([{ id: 12, v: 'moved' }]);
  });

  test('the same key with a different request is 422 and writes nothing', async () => {
    const key = newKey();
    expect((await send('append/{db}?table=items', key, { data: [{ id: 20, v: 'x' }] })).status).toBe(200);

    const otherBody = await send('append/{db}?table=items', key, { data: [{ id: 21, v: 'y' }] });
    const otherRoute = await send(`delete/{db}?table=items&predicate=${encodeURIComponent('id = 20')}`, key);

    for (const res of [otherBody, otherRoute]) {
      expect(res.status).toBe(422);
      expect(res.json.code).toBe('idempotency_key_reused');
    }
    expect(await rows('id IN (20, 21)')).toEqual([{ id: 20, v: 'x' }]);
  });

  test('an append answered without its rows (Prefer: return=minimal) is replayed the same way', async () => {
    const key = newKey();
    const body = { data: [{ id: 80, v: 'min' }] };
    const minimal = () =>
      api.raw('POST', '/v1/append/idem?table=items', body, { 'idempotency-key': key, prefer: 'return=minimal' });

    const first = await minimal();
    const again = await minimal();
    const withRows = await send('append/{db}?table=items', key, body);

    expect([first.status, again.status]).toEqual([204, 204]);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('x-strata-table-version')).toBe(first.headers.get('x-strata-table-version'));
    // The preference is how to answer, not part of the request's identity: asked for rows, the replay has them.
    expect(withRows.status).toBe(200);
    expect(withRows.headers.get('idempotent-replayed')).toBe('true');
    expect(withRows.json.data).toEqual(body.data);
    expect(await rows('id = 80')).toEqual([{ id: 80, v: 'min' }]);
  });

  test('a repeat while the first is still running is 409 with Retry-After', async () => {
    const key = newKey();
    const store = strata.app.ctx.store;
    const account = await store.ensureAccount('acme');
    const database = await store.findDatabase(account.id, 'idem');
    const body = { data: [{ id: 30, v: 'z' }] };
    // Another node holds the key for this very request now, as it would while its write runs.
    const begun = await store.beginIdempotent(
      { accountId: account.id, databaseId: database?.id ?? '', key },
      fingerprintOf(
        { kind: 'append', table: 'items' },
        (await store.findTable(database?.id ?? '', 'items'))?.tableId ?? '',
        new arrow.Table({
          id: arrow.vectorFromArray([30n], new arrow.Int64()),
          v: arrow.vectorFromArray(['z'], new arrow.Utf8()),
        }).batches,
      ),
      'another-node',
      60_000,
      60_000,
    );
    expect(begun.kind).toBe('started');

    const res = await send('append/{db}?table=items', key, body);

    expect(res.status).toBe(409);
    expect(res.json.code).toBe('idempotency_in_flight');
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await rows('id = 30')).toEqual([]);
  });

  test('keys are per database, and expire: once forgotten, the same key writes again', async () => {
    const key = newKey();
    const body = { data: [{ id: 40, v: 'w' }] };
    expect((await send('append/{db}?table=items', key, body)).status).toBe(200);
    const elsewhere = await send('append/{db}?table=items', key, body, 'other');
    expect(elsewhere.headers.get('idempotent-replayed')).toBeNull();
    expect(await rows('id = 40', 'other')).toEqual([{ id: 40, v: 'w' }]);

    await new Promise((resolve) => setTimeout(resolve, 1700));
    const later = await send('append/{db}?table=items', key, body);

    expect(later.status).toBe(200);
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    expect(await rows('id = 40')).toEqual([
      { id: 40, v: 'w' },
      { id: 40, v: 'w' },
    ]);
  });

  test("another account's same key on its own database of the same name is its own: no replay, no 422", async () => {
    const key = newKey();
    const body = { data: [{ id: 70, v: 'mine' }] };
    expect((await send('append/{db}?table=items', key, body)).status).toBe(200);
    const bob = await strata.as('bob');
    await activeLocalDatabase(bob, 'idem', 'idem-bob');
    await tablesOf(bob, 'idem').create({
      table_name: 'items',
      schema: [
        { name: 'id', type: 'i64' },
        { name: 'v', type: 'utf8' },
      ],
    });

    const theirs = await bob.request<Record<string, unknown>>(
      'POST',
      '/v1/append/idem?table=items',
      { data: [{ id: 70, v: 'bob' }] },
      {
        'idempotency-key': key,
        accept: 'application/json',
      },
    );

    expect(theirs.status).toBe(200);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.json).toEqual({ data: [{ id: 70, v: 'bob' }] });
    expect(await rows('id = 70')).toEqual([{ id: 70, v: 'mine' }]);
  });

  test('a key belongs to the table it wrote: after a drop and re-create, the same request writes the new table', async () => {
    const d = tablesOf(api, 'idem');
    const schema = [
      { name: 'id', type: 'i64', nullable: false },
      { name: 'v', type: 'utf8' },
    ];
    expect((await d.create({ table_name: 'reborn', schema })).status).toBe(200);
    const key = newKey();
    const body = { data: [{ id: 7, v: 'seven' }] };
    const first = await send('append/{db}?table=reborn', key, body);
    expect(first.status).toBe(200);

    expect((await d.drop('reborn')).status).toBe(200);
    expect((await d.create({ table_name: 'reborn', schema })).status).toBe(200);
    const again = await send('append/{db}?table=reborn', key, body);

    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(Number(again.headers.get('x-strata-table-version'))).toBeGreaterThan(0);
    const stored = await api.request<{ data: Row[] }>(
      'POST',
      '/v1/query_sql/idem',
      { query: 'SELECT id::INTEGER AS id, v FROM reborn' },
      { accept: 'application/json' },
    );
    expect(stored.json.data).toEqual([{ id: 7, v: 'seven' }]);
    // Sent once more, it is the new table's write that is replayed.
    const replay = await send('append/{db}?table=reborn', key, body);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('x-strata-table-version')).toBe(again.headers.get('x-strata-table-version'));
  });

  test('the same key for another table is still another request (422)', async () => {
    const d = tablesOf(api, 'idem');
    expect(
      (
        await d.create({
          table_name: 'beside',
          schema: [
            { name: 'id', type: 'i64', nullable: false },
            { name: 'v', type: 'utf8' },
          ],
        })
      ).status,
    ).toBe(200);
    const key = newKey();
    const body = { data: [{ id: 8, v: 'eight' }] };
    expect((await send('append/{db}?table=items', key, body)).status).toBe(200);

    const other = await send('append/{db}?table=beside', key, body);

    expect(other.status).toBe(422);
    expect(other.json.code).toBe('idempotency_key_reused');
  });

  test('a write refused before it committed frees its key for a corrected retry', async () => {
    const key = newKey();
    const bad = await send('append/{db}?table=nope', key, { data: [{ id: 50 }] });
    expect(bad.status).toBe(404);

    const good = await send('append/{db}?table=nope', key, { data: [{ id: 50 }] });
    expect(good.status).toBe(404);
    expect(good.headers.get('idempotent-replayed')).toBeNull();
  });

  test('the OpenAPI document names the header on every write route', async () => {
    const doc = (await (await fetch(`${strata.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, { post?: { parameters?: { in: string; name: string }[] } }>;
    };

    for (const route of ['append', 'update', 'delete']) {
      const parameters = doc.paths[`/v1/${route}/{database}`]?.post?.parameters ?? [];
      expect(parameters, route).toContainEqual(expect.objectContaining({ in: 'header', name: 'idempotency-key' }));
    }
  });

  test.each([
    ['empty', ''],
    ['longer than 255 characters', 'k'.repeat(256)],
  ])('a key that is %s is 400 naming the header', async (_what, key) => {
    const res = await send('append/{db}?table=items', key, { data: [{ id: 60, v: 'n' }] });

    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/Idempotency-Key/);
    expect(await rows('id = 60')).toEqual([]);
  });
});

describe("a request's fingerprint", () => {
  test('tells apart where one part ends and the next begins, and a part left out', () => {
    const of = (table: string, predicate?: string) => fingerprintOf({ kind: 'update', table, predicate }, 't_1', []);
    expect(of('ab', 'c')).not.toBe(of('a', 'bc'));
    expect(of('items', undefined)).not.toBe(of('items', ''));
    expect(of('items', 'id = 1')).toBe(of('items', 'id = 1'));
    // The table instance leads: a table dropped and made again under its name is another table.
    expect(fingerprintOf({ kind: 'delete', table: 'items' }, 't_1', undefined)).toMatch(/^t_1\//);
  });

  test('is of the rows a body holds: the same rows as JSON spaced otherwise, or as Arrow in two batches, are the same request', async () => {
    const key = newKey();
    const sent = [
      { id: 71, v: 'a' },
      { id: 72, v: null },
    ];
    const first = await send('append/{db}?table=items', key, { data: sent });
    expect(first.status).toBe(200);

    const spaced = await api.request(
      'POST',
      '/v1/append/idem?table=items',
      `{ "data" : [ {"v": "a", "id": 71}, {"id": 72, "v": null} ] }`,
      { 'idempotency-key': key, accept: 'application/json', 'content-type': 'application/json' },
    );
    const table = new arrow.Table({
      id: arrow.vectorFromArray([71n, 72n], new arrow.Int64()),
      v: arrow.vectorFromArray(['a', null], new arrow.Utf8()),
    });
    const twoBatches = ipcOf(
      [table.batches[0]?.slice(0, 1), table.batches[0]?.slice(1, 2)].filter((b) => b !== undefined),
    );
    const asArrow = await api.request('POST', '/v1/append/idem?table=items', twoBatches, {
      'idempotency-key': key,
      'content-type': ARROW,
      accept: 'application/json',
    });

    for (const again of [spaced, asArrow]) {
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    }
    expect(await rows('id IN (71, 72)')).toEqual([
      { id: 71, v: 'a' },
      { id: 72, v: null },
    ]);
    const changed = await send('append/{db}?table=items', key, { data: [sent[0], { id: 72, v: 'b' }] });
    expect(changed.status).toBe(422);
  });
});
