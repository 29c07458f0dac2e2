import type { FtsIndex } from '../indexes/registry.js';
import type { TextOperator } from '../rows/source.js';
import { bm25, type CollectionStatistics } from './bm25.js';
import type { ColumnTexts } from './statistics.js';

/** A row's tokens in one column, as BM25 reads them. */
interface Doc {
  tokens: string[];
  terms: ReadonlySet<string>;
}

/** A commit of this node's, counted in by the next search. */
interface Commit {
  version: number;
  removed: readonly bigint[];
  added: readonly bigint[];
  texts: ColumnTexts;
}

/**
 * The rows this node committed since its upkeep last folded the full-text indexes, searched here beside them
 * (docs/performance.md, Fresh rows): Lance would tokenize each of them again for every query. Only where this node
 * is the table's one writer and folder (one node on its own store): every row no index covers is then one it wrote
 * since the version its last fold started from, and a search reads the indexes alone (`fastSearch`) and this.
 * A row the fold covered after all is in both, and is read once. Until this node's first fold of the table, it is
 * not usable, and searches read Lance's own way.
 */
export class FreshText {
  /** The version this node's last fold of the table started from; undefined before its first. */
  private foldedAt: number | undefined;
  /** Rows by key, with the version that wrote them and their documents by column. */
  private readonly rows = new Map<bigint, { version: number; docs: Map<string, Doc> }>();
  /** Per column, the rows holding each term. */
  private readonly postings = new Map<string, Map<string, Set<bigint>>>();
  private queue: Commit[] = [];
  /** The fold whose rows were last let go. */
  private swept: number | undefined;
  private draining: Promise<void> | undefined;

  constructor(
    private readonly fts: readonly FtsIndex[],
    /** Whether this node is the table's one writer (a store no other node shares). */
    readonly tracking: boolean,
    private readonly tokens: (texts: readonly (string | null)[], column: string) => Promise<string[][]>,
  ) {
    for (const f of fts) this.postings.set(f.column, new Map());
  }

  /** Whether a text search may read the indexes alone and this beside them. */
  get usable(): boolean {
    return this.tracking && this.foldedAt !== undefined;
  }

  /** Rows held (for `/metrics` and tests). */
  get size(): number {
    return this.rows.size;
  }

  /** This node committed `version`: it removed the rows of `removed` and wrote those of `added`, with `texts`. */
  committed(version: number, removed: readonly bigint[], added: readonly bigint[], texts: ColumnTexts): void {
    if (this.tracking) this.queue.push({ version, removed, added, texts });
  }

  /**
   * Every row committed up to `version` is in the full-text indexes: upkeep folded them, or a read of the indexes'
   * statistics at that version found none outside them.
   */
  folded(version: number): void {
    if (this.tracking && (this.foldedAt === undefined || version > this.foldedAt)) this.foldedAt = version;
  }

  /**
   * The rows here matching a query's tokens over `column` (any of them, or all under AND), each with its BM25 score
   * over the live rows; the best `limit`, and every row tied with the last of them.
   */
  async search(
    column: string,
    query: readonly string[],
    operator: TextOperator,
    stats: CollectionStatistics,
    limit: number,
  ): Promise<{ keys: bigint[]; values: number[] }> {
    await this.drain();
    const postings = this.postings.get(column);
    const distinct = [...new Set(query)];
    const candidates = new Set<bigint>();
    for (const term of distinct) for (const key of postings?.get(term) ?? []) candidates.add(key);
    const scored: { key: bigint; value: number }[] = [];
    for (const key of candidates) {
      const doc = this.rows.get(key)?.docs.get(column);
      if (doc === undefined) continue;
      if (operator === 'AND' && !distinct.every((term) => doc.terms.has(term))) continue;
      scored.push({ key, value: bm25(query, doc.tokens, stats) });
    }
    scored.sort((a, b) => b.value - a.value || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const edge = scored[limit - 1]?.value;
    const kept = edge === undefined ? scored : scored.filter((s) => s.value >= edge);
    return { keys: kept.map((s) => s.key), values: kept.map((s) => s.value) };
  }

  /** Counts in the commits queued, in order, and lets go of rows a fold covered; one drain at a time. */
  private drain(): Promise<void> {
    const drained = (this.draining ?? Promise.resolve()).then(async () => {
      while (this.queue.length > 0) {
        const commit = this.queue.shift() as Commit;
        for (const key of commit.removed) this.remove(key);
        if (this.foldedAt !== undefined && commit.version <= this.foldedAt) continue;
        await this.add(commit);
      }
      if (this.foldedAt === undefined || this.foldedAt === this.swept) return;
      this.swept = this.foldedAt;
      for (const [key, row] of this.rows) if (row.version <= this.foldedAt) this.remove(key);
    });
    this.draining = drained.catch(() => undefined);
    return drained;
  }

  private async add(commit: Commit): Promise<void> {
    // A replaced row's earlier text leaves first, so that its terms' postings keep the new one.
    for (const key of commit.added) this.remove(key);
    const docs = commit.added.map(() => new Map<string, Doc>());
    for (const { column } of this.fts) {
      const tokens = await this.tokens(commit.texts.get(column) ?? [], column);
      const postings = this.postings.get(column) as Map<string, Set<bigint>>;
      tokens.forEach((row, i) => {
        const key = commit.added[i];
        if (key === undefined || row.length === 0) return;
        const terms = new Set(row);
        docs[i]?.set(column, { tokens: row, terms });
        for (const term of terms) {
          let keys = postings.get(term);
          if (keys === undefined) {
            keys = new Set();
            postings.set(term, keys);
          }
          keys.add(key);
        }
      });
    }
    commit.added.forEach((key, i) => {
      this.rows.set(key, { version: commit.version, docs: docs[i] as Map<string, Doc> });
    });
  }

  private remove(key: bigint): void {
    const row = this.rows.get(key);
    if (row === undefined) return;
    this.rows.delete(key);
    for (const [column, doc] of row.docs) {
      const postings = this.postings.get(column);
      for (const term of doc.terms) {
        const keys = postings?.get(term);
        keys?.delete(key);
        if (keys?.size === 0) postings?.delete(term);
      }
    }
  }
}
