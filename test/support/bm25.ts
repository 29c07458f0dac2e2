import { expect } from 'vitest';
import type { Client } from './server.js';
import type { tablesOf } from './tables.js';

/** BM25 over the live rows, computed here: k1 1.2, b 0.75, Lucene's idf; rows without tokens are no documents. */
export function referenceBm25(
  live: ReadonlyMap<number, string | null>,
  query: string,
  and: boolean,
): Map<number, number> {
  const tokens = (text: string | null) =>
    (text ?? '')
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter(Boolean);
  const docs = [...live].map(([id, text]) => [id, tokens(text)] as const).filter(([, t]) => t.length > 0);
  const total = docs.reduce((n, [, t]) => n + t.length, 0);
  const df = new Map<string, number>();
  for (const [, t] of docs) for (const term of new Set(t)) df.set(term, (df.get(term) ?? 0) + 1);
  const terms = tokens(query);
  const scores = new Map<number, number>();
  for (const [id, t] of docs) {
    let score = 0;
    let all = true;
    for (const term of terms) {
      const tf = t.filter((x) => x === term).length;
      if (tf === 0) {
        all = false;
        continue;
      }
      const n = df.get(term) ?? 0;
      const idf = Math.log(1 + (docs.length - n + 0.5) / (n + 0.5));
      score += (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * t.length * docs.length) / total));
    }
    if (score > 0 && (!and || all)) scores.set(id, score);
  }
  return scores;
}

/**
 * A text table (`id`, `body`) written through HTTP, its live rows kept here, and searches checked against
 * `referenceBm25` over them: rankings exactly, scores to 1e-6.
 */
export class LiveTexts {
  readonly live = new Map<number, string | null>();
  private next = 0;

  constructor(
    private readonly tables: ReturnType<typeof tablesOf>,
    private readonly table: string,
    private readonly body: () => string | null,
    private readonly random: () => number,
  ) {}

  async append(n: number): Promise<void> {
    const rows = Array.from({ length: n }, () => ({ id: this.next++, body: this.body() }));
    expect((await this.tables.append(this.table, rows)).status).toBe(200);
    for (const row of rows) this.live.set(row.id, row.body);
  }

  /** Replaces or deletes about a tenth of the rows, picked at random. */
  async change(action: 'update' | 'delete'): Promise<void> {
    const ids = [...this.live.keys()].filter(() => this.random() < 0.1);
    if (ids.length === 0) return;
    const predicate = `id IN (${ids.join(', ')})`;
    if (action === 'delete') {
      expect((await this.tables.remove(this.table, predicate)).status).toBe(200);
      for (const id of ids) this.live.delete(id);
      return;
    }
    const rows = ids.map((id) => ({ id, body: this.body() }));
    expect((await this.tables.update(this.table, predicate, rows)).status).toBe(200);
    for (const row of rows) this.live.set(row.id, row.body);
  }

  /** A text search through `client` answers the live rows' ranking and scores. */
  async expectScores(client: Client, database: string, query: string, and: boolean, step: string): Promise<void> {
    const reply = await client.request<{ data: { id: number; _bm25: number }[] }>(
      'POST',
      `/v1/hybrid_search/${database}`,
      {
        table_name: this.table,
        text_field: 'body',
        text_query: query,
        operator: and ? 'and' : 'or',
        k: 1000,
        projection: ['id'],
      },
      { accept: 'application/json' },
    );
    expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    const expected = [...referenceBm25(this.live, query, and)].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
    const got = reply.json.data;
    expect(
      got.map((r) => r.id),
      `${step}: "${query}" ranking`,
    ).toEqual(expected.map(([id]) => id));
    got.forEach((row, i) => {
      const want = expected[i]?.[1] ?? Number.NaN;
      expect(Math.abs(row._bm25 - want) / want, `${step}: "${query}" row ${row.id}`).toBeLessThan(1e-6);
    });
  }
}
