import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { arrow } from '../src/arrow/arrow.js';
import { jsonText, rowsToJson } from '../src/arrow/to-json.js';
import { schemaFromFields, schemaToIpc } from '../src/engine/tables/schema.js';
import { JsonThread } from '../src/engine/writes/json-rows.js';
import { batchFromJson } from '../src/engine/writes/rows.js';
import { BadRequest } from '../src/errors.js';
import { activeLocalDatabase, startStrata, type TestServer } from './support/server.js';
import { tablesOf } from './support/tables.js';

const schema = schemaFromFields([
  { name: 'id', type: 'i64', nullable: false },
  { name: 'name', type: 'utf8' },
  { name: 'at', type: 'timestamp_ms' },
  { name: 'v', type: 'vector', dim: 3 },
]);
const schemaIpc = schemaToIpc(schema);
const rows = Array.from({ length: 50 }, (_, i) => ({
  id: i,
  name: i % 7 === 0 ? null : `név ${i}`,
  at: `2024-03-0${(i % 9) + 1}T10:00:00.123Z`,
  v: i % 5 === 0 ? null : [i, -i, i / 2],
}));
/** A body in a buffer of its own, as a large request body arrives. */
const bodyOf = (value: unknown) => new Uint8Array(Buffer.from(JSON.stringify(value)));

let parser: JsonThread;

describe('JSON rows converted on a thread of their own', () => {
  afterEach(async () => {
    await parser.close();
  });

  test('the rows come back as the batch the event loop would have built, with the stream that encodes them', async () => {
    parser = new JsonThread(0);

    const parsed = await parser.parse(schema, schemaIpc, bodyOf({ data: rows }));

    expect(rowsToJson(parsed.batches)).toEqual(rowsToJson([batchFromJson(schema, rows)]));
    expect(parsed.stream).toBeDefined();
    expect(parsed.batches[0]?.schema.fields.map((f) => String(f.type))).toEqual(
      schema.fields.map((f) => String(f.type)),
    );
  });

  test('a body up to the inline size is parsed where it is called, and one past it on the thread', async () => {
    const body = bodyOf({ data: rows });
    parser = new JsonThread(body.byteLength);
    const larger = bodyOf({ data: [...rows, { id: 99 }] });

    const inline = await parser.parse(schema, schemaIpc, body);
    const threaded = await parser.parse(schema, schemaIpc, larger);

    expect(body.byteLength).toBeGreaterThan(0);
    expect(inline.batches[0]?.numRows).toBe(rows.length);
    expect(larger.byteLength).toBe(0);
    expect(threaded.batches[0]?.numRows).toBe(rows.length + 1);
  });

  test('a body may start with a byte order mark', async () => {
    parser = new JsonThread(0);

    const parsed = await parser.parse(
      schema,
      schemaIpc,
      new Uint8Array(Buffer.from(`\ufeff${JSON.stringify({ data: rows })}`)),
    );

    expect(parsed.batches[0]?.numRows).toBe(rows.length);
  });

  test("a body in a buffer of its own moves to the thread (the caller's view is emptied), a shared one is copied", async () => {
    parser = new JsonThread(0);
    const own = bodyOf({ data: rows });
    const shared = Buffer.from(`  ${JSON.stringify({ data: rows })}`).subarray(2);

    await parser.parse(schema, schemaIpc, own);
    const fromShared = await parser.parse(schema, schemaIpc, shared);

    expect(own.byteLength).toBe(0);
    expect(shared.byteLength).toBeGreaterThan(0);
    expect(fromShared.batches[0]?.numRows).toBe(rows.length);
  });

  test.each([
    ['empty', new Uint8Array(0), /the body is empty but Content-Type is application\/json/],
    ['not JSON', bodyOf('x').subarray(1, 2), /the body is not valid JSON/],
    ['an array', bodyOf([{ id: 1 }]), /^body must be object$/],
    ['without data', bodyOf({}), /body is missing required property "data"/],
    ['with another key', bodyOf({ data: [], more: 1 }), /body has unknown property "more"/],
    ['data not an array', bodyOf({ data: { id: 1 } }), /body.data must be array/],
    ['a row not an object', bodyOf({ data: [{ id: 1 }, null] }), /body.data\[1\] must be object/],
    ['an unknown column', bodyOf({ data: [{ id: 1, nope: 2 }] }), /row 0: unknown column "nope"/],
    ['a bad value', bodyOf({ data: [{ id: 1 }, { id: 2, v: [1, 2] }] }), /row 1, column "v": must be an array/],
  ])('a body %s is refused with a BadRequest that names what is wrong', async (_, bytes, message) => {
    parser = new JsonThread(0);

    const refused = await parser.parse(schema, schemaIpc, bytes).catch((err: unknown) => err);

    expect(refused).toBeInstanceOf(BadRequest);
    expect((refused as Error).message).toMatch(message);
  });

  test('bodies sent together are answered each with its own rows', async () => {
    parser = new JsonThread(0);

    const results = await Promise.all(
      Array.from({ length: 8 }, (_, n) => parser.parse(schema, schemaIpc, bodyOf({ data: rows.slice(0, n + 1) }))),
    );

    expect(results.map((r) => r.batches[0]?.numRows)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  test('rows encoded as JSON there read as the event loop would have written them', async () => {
    parser = new JsonThread(0);
    const batch = batchFromJson(schema, rows);

    const text = await parser.encode(arrow.tableToIPC(new arrow.Table([batch]), 'stream'), 1 << 20);

    expect(Buffer.from(text).toString('utf8')).toBe(jsonText([batch]));
  });

  test('a reply longer as JSON than its cap is refused there as result_too_large, and the thread lives on', async () => {
    parser = new JsonThread(0);
    const ipc = () => arrow.tableToIPC(new arrow.Table([batchFromJson(schema, rows)]), 'stream');

    const refused = await parser.encode(ipc(), 16).then(
      () => undefined,
      (err: unknown) => err,
    );

    expect(refused).toMatchObject({ kind: 'invalid', code: 'result_too_large' });
    expect((await parser.encode(ipc(), 1 << 20)).byteLength).toBeGreaterThan(16);
  });

  test('once closed, it refuses bodies', async () => {
    parser = new JsonThread(0);
    await parser.parse(schema, schemaIpc, bodyOf({ data: rows }));

    await parser.close();

    await expect(parser.parse(schema, schemaIpc, bodyOf({ data: rows }))).rejects.toThrow(/closed/);
  });
});

describe('JSON through HTTP on the JSON thread', () => {
  let strata: TestServer;
  let db: ReturnType<typeof tablesOf>;
  beforeAll(async () => {
    strata = await startStrata();
    const api = await strata.as('acme');
    await activeLocalDatabase(api, 'big');
    db = tablesOf(api, 'big');
    await db.create({
      table_name: 'wide',
      schema: [
        { name: 'id', type: 'i64', nullable: false },
        { name: 'v', type: 'vector', dim: 128 },
      ],
    });
  });
  afterAll(() => strata?.close());

  test('a JSON append whose reply is over 1 MB as Arrow (parsed and answered on the thread) answers the rows as sent', async () => {
    const sent = Array.from({ length: 3000 }, (_, i) => ({
      id: i,
      v: Array.from({ length: 128 }, (_, j) => ((i * 131 + j) % 1000) / 8),
    }));

    const res = await db.append('wide', sent);
    const refused = await db.append('wide', [...sent.slice(0, 5), { id: 'x' }]);

    expect(res.status).toBe(200);
    expect(res.json.data).toEqual(sent);
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatch(/^row 5, column "id": must be an integer/);
  });
});
