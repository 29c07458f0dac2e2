import type fc from 'fast-check';
import { databaseRoutes, publicRoutes, strayRoutes } from './admin-requests.js';
import type { FuzzCase } from './cases.js';
import { jsonRoute } from './envelope.js';
import { weighted } from './hostile.js';
import { rawCases } from './raw-requests.js';
import { listTablesRoute, rowsRoute } from './rows-requests.js';
import { sqlQueries } from './sql-grammar.js';
import {
  createBodies,
  dropBodies,
  exactBodies,
  schemaBodies,
  searchBodies,
  sqlBodies,
  textBodies,
} from './table-bodies.js';
import type { World } from './world.js';

/** Every kind of request the fuzzer sends, weighted toward the data plane. */
export function fuzzCases(world: World): fc.Arbitrary<FuzzCase> {
  const sql = sqlQueries(world.tables, 'secret');
  return weighted<FuzzCase>(
    [9, rowsRoute(world, 'append')],
    [4, rowsRoute(world, 'update')],
    [3, rowsRoute(world, 'delete')],
    [9, jsonRoute(world, 'hybrid_search', searchBodies(world))],
    [3, jsonRoute(world, 'count', textBodies(world, false))],
    [3, jsonRoute(world, 'token_match', textBodies(world, true))],
    [4, jsonRoute(world, 'exact_match', exactBodies(world))],
    [8, jsonRoute(world, 'query_sql', sqlBodies(sql))],
    [4, jsonRoute(world, 'create_table', createBodies(world))],
    [2, jsonRoute(world, 'drop_table', dropBodies(world))],
    [2, jsonRoute(world, 'schema', schemaBodies(world))],
    [2, listTablesRoute(world)],
    [4, databaseRoutes(world)],
    [1, publicRoutes(world)],
    [2, strayRoutes(world)],
    [5, rawCases(world)],
  );
}
