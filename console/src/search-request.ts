import type { SearchRequest, TextFieldSpec } from '@strata/client';

/** A text field and its boost, as the search form holds them: the boost always there, 1 unless changed. */
export type BoostedField = Required<TextFieldSpec>;

/**
 * A search as the client takes it. One text field goes as `textField`, several as `textFields` with their boosts
 * (the API's `text_fields`), so that one field reads as it always has.
 */
export type ConsoleSearch = SearchRequest;

/** The JSON body of `POST /v1/hybrid_search/{database}` that the search is: for the curl command shown. */
export function bodyOf(table: string, search: ConsoleSearch): Record<string, unknown> {
  const body: Record<string, unknown> = {
    table_name: table,
    text_query: search.text,
    text_field: search.textField,
    text_fields: search.textFields,
    vector_query: search.vector,
    vector_field: search.vectorField,
    filter: search.filter,
    k: search.k,
    offset: search.offset,
    operator: search.operator,
    projection: search.projection,
    rrf_k: search.rrfK,
    text_weight: search.textWeight,
    vector_weight: search.vectorWeight,
    consistency: search.consistency,
    explain: search.explain,
  };
  for (const [name, value] of Object.entries(body)) if (value === undefined) delete body[name];
  return body;
}

/** A POSIX shell word holding `text` exactly. */
const shellWord = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

/**
 * The search as a curl command. The key is the `STRATA_API_KEY` variable, never its value: what is copied from the
 * page may be pasted anywhere.
 */
export function curlOf(origin: string, database: string, table: string, search: ConsoleSearch): string {
  const url = `${origin}/v1/hybrid_search/${encodeURIComponent(database)}`;
  return [
    `curl -sS -X POST ${shellWord(url)}`,
    `  -H "Authorization: Bearer $STRATA_API_KEY"`,
    `  -H 'Content-Type: application/json' -H 'Accept: application/json'`,
    `  -d ${shellWord(JSON.stringify(bodyOf(table, search)))}`,
  ].join(' \\\n');
}

/** The search as `@strata/client` code, the key again read from the environment. */
export function clientCodeOf(origin: string, database: string, table: string, search: ConsoleSearch): string {
  const fields = Object.entries(search).filter(([, value]) => value !== undefined);
  const request = fields.map(([name, value]) => `  ${name}: ${JSON.stringify(value)},`).join('\n');
  return [
    `import { Strata } from '@strata/client';`,
    '',
    `const strata = new Strata({ url: ${JSON.stringify(origin)}, apiKey: process.env.STRATA_API_KEY ?? '' });`,
    `const table = strata.database(${JSON.stringify(database)}).table(${JSON.stringify(table)});`,
    `const { rows, receipt, explain } = await table.searchWithReceipt({\n${request}\n}, { rows: true });`,
  ].join('\n');
}
