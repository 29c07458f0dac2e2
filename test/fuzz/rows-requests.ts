/** Requests of the rows routes (append, update, delete) and list_tables: query strings, JSON and Arrow bodies. */
import fc from 'fast-check';
import { ARROW } from '../support/tables.js';
import { arrowRowsBody, type MadeBody } from './arrow-bodies.js';
import type { FuzzCase } from './cases.js';
import { assemble, type Body, envelopes, jsonBytes, percent, textDamages } from './envelope.js';
import { anyJson, anyString, hostileNames, hostileValue, jsonText, weighted } from './hostile.js';
import { plainPredicates, predicates } from './sql-grammar.js';
import { invalidValue, validValue } from './values.js';
import type { World, WorldTable } from './world.js';

/** The table a rows request names: the one its body was made for mostly, others sometimes. */
function tableNames(world: World, table: WorldTable): fc.Arbitrary<string> {
  return weighted(
    [12, fc.constant(table.name)],
    [1, fc.constantFrom(...world.tables.map((t) => t.name), ...world.foreignTables)],
    [1, fc.constantFrom(...world.scratchTables)],
    [1, fc.constantFrom('nope', 'DOCS', 'Docs', 'docs ', '_docs')],
    [1, hostileNames],
  );
}

/** The query string of a rows route: `table` and `predicate`, sometimes spelled wrong. */
function rowsQuery(
  world: World,
  table: WorldTable,
  withPredicate: boolean,
): fc.Arbitrary<{ query: string; note: string }> {
  return fc
    .record({
      table: tableNames(world, table),
      predicate: weighted([3, plainPredicates(table)], [2, predicates(table)]),
      form: weighted(
        [12, fc.constant('plain')],
        [
          1,
          fc.constantFrom(
            'no table',
            'no predicate',
            'twice',
            'extra',
            'broken escape',
            'empty',
            'brackets',
            'no query',
          ),
        ],
      ),
    })
    .map(({ table: t, predicate, form }) => {
      const p = withPredicate ? `&predicate=${percent(predicate)}` : '';
      const note = `${form === 'plain' ? '' : `query ${form}`}`;
      switch (form) {
        case 'no table':
          return { query: `?${p.slice(1)}`, note };
        case 'no predicate':
          return { query: `?table=${percent(t)}`, note };
        case 'twice':
          return { query: `?table=${percent(t)}&table=docs${p}${p}`, note };
        case 'extra':
          return { query: `?table=${percent(t)}${p}&purge=true&__proto__=1`, note };
        case 'broken escape':
          return { query: `?table=%ZZ${p}%`, note };
        case 'empty':
          return { query: `?table=&predicate=`, note };
        case 'brackets':
          return { query: `?table[]=${percent(t)}&predicate[a]=1`, note };
        case 'no query':
          return { query: '', note };
        default:
          return { query: `?table=${percent(t)}${p}`, note };
      }
    });
}

/** A row of a table as JSON: valid, or with one fault (a wrong value, a missing key, an unknown key). */
function jsonRow(table: WorldTable): fc.Arbitrary<Body> {
  const fields = table.schema.fields;
  const valid = fc.record(Object.fromEntries(fields.map((f) => [f.name, validValue(f)])));
  const fault = weighted<{ kind: string; key: string; value: unknown }>(
    [3, fc.constantFrom(...fields).chain((f) => invalidValue(f).map((value) => ({ kind: 'set', key: f.name, value })))],
    [1, fc.constantFrom(...fields).map((f) => ({ kind: 'drop', key: f.name, value: undefined }))],
    [1, fc.tuple(anyString, anyJson).map(([key, value]) => ({ kind: 'set', key, value }))],
  );
  return weighted(
    [6, valid],
    [
      1,
      fc.tuple(valid, fault).map(([row, f]) => {
        if (f.kind === 'drop') {
          const { [f.key]: _gone, ...rest } = row;
          return rest;
        }
        return { ...row, [f.key]: f.value };
      }),
    ],
  );
}

function jsonRows(table: WorldTable, count: { min: number; max: number }): fc.Arbitrary<unknown[]> {
  return fc.array(jsonRow(table), { minLength: count.min, maxLength: count.max });
}

function rowsBodies(
  world: World,
  table: WorldTable,
  count: { min: number; max: number },
): fc.Arbitrary<{ bytes: Uint8Array; note: string; arrow: boolean }> {
  const others = world.tables;
  const json = fc
    .record({
      rows: weighted([12, jsonRows(table, count)], [1, jsonRows(table, { min: 300, max: 1500 })]),
      shape: weighted(
        [12, fc.constant('plain')],
        [1, fc.constantFrom('no data', 'data null', 'data object', 'extra key', 'array')],
      ),
      damage: textDamages,
      at: fc.nat(),
    })
    .map(({ rows, shape, damage, at }) => {
      const value =
        shape === 'no data'
          ? { rows }
          : shape === 'data null'
            ? { data: null }
            : shape === 'data object'
              ? { data: rows[0] ?? {} }
              : shape === 'extra key'
                ? { data: rows, table: 'docs' }
                : shape === 'array'
                  ? rows
                  : { data: rows };
      const made = jsonBytes(value, damage, at);
      return {
        bytes: made.bytes,
        note: `json ${rows.length} rows${shape === 'plain' ? '' : `, ${shape}`}${made.note}`,
        arrow: false,
      };
    });
  const arrowBody = fc
    .constantFrom(...others)
    .chain((other) => arrowRowsBody(table.schema, other.schema))
    .map((made: MadeBody) => ({ ...made, arrow: true }));
  return weighted([6, json], [7, arrowBody]);
}

export function rowsRoute(world: World, name: 'append' | 'update' | 'delete'): fc.Arbitrary<FuzzCase> {
  return fc.constantFrom(...world.tables).chain((table) =>
    fc
      .record({
        env: envelopes(world, undefined),
        query: rowsQuery(world, table, name !== 'append'),
        body: weighted(
          [
            name === 'delete' ? 1 : 20,
            rowsBodies(world, table, name === 'update' ? { min: 0, max: 3 } : { min: 0, max: 6 }),
          ],
          [name === 'delete' ? 12 : 1, fc.constant(undefined)],
        ),
      })
      .map(({ env, query, body }) => {
        const contentType = env.contentType ?? (body?.arrow ? ARROW : 'application/json');
        return assemble(
          world,
          `POST /v1/${name}`,
          'POST',
          `/v1/${name}/${env.db.segment}${query.query}`,
          { ...env, contentType },
          body === undefined
            ? undefined
            : { bytes: body.bytes, note: [body.note, query.note].filter(Boolean).join(', ') },
          env.db.name,
        );
      }),
  );
}

export function listTablesRoute(world: World): fc.Arbitrary<FuzzCase> {
  return fc
    .record({
      env: envelopes(world, 'application/json'),
      method: fc.constantFrom('GET', 'POST', 'HEAD'),
      body: fc.option(hostileValue),
    })
    .map(({ env, method, body }) =>
      assemble(
        world,
        `${method === 'HEAD' ? 'GET' : method} /v1/list_tables`,
        method,
        `/v1/list_tables/${env.db.segment}`,
        env,
        method === 'POST' && body !== null ? { bytes: Buffer.from(jsonText(body)), note: 'body' } : undefined,
        env.db.name,
      ),
    );
}
