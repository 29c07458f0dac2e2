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

/** What a search read of the fresh rows: the fold its index read covers, taken before that read began. */
export interface FreshRead {
  since: number;
  id: number;
}

/**
 * The rows this node committed since its upkeep last folded the full-text indexes, searched here beside them
 * (docs/performance.md, Fresh rows): Lance would tokenize each of them again for every query. Only where this node
 * is the table's one writer and folder (one node on its own store): every row no index covers is then one it wrote
 * since the version its last fold started from, and a search reads the indexes alone (`fastSearch`) and this.
 * A row the fold covered after all is in both, and is read once. Until this node's first fold of the table (or a
 * read that found the indexes covering every row), and after a write whose commit it could not follow, it is not
 * usable, and searches read Lance's own way.
 */
export class FreshText {
  /** The version this node's last fold of the table started from; undefined while not usable. */
  private foldedAt: number | undefined;
  /** Rows by key, with the version that wrote them and their documents by column. */
  private readonly rows = new Map<bigint, { version: number; docs: Map<string, Doc> }>();
  /** Per column, the rows holding each term. */
  private readonly postings = new Map<string, Map<string, Set<bigint>>>();
  private queue: Commit[] = [];
  private draining: Promise<void> | undefined;
  /** Searches under way, by id, with the fold their index read covers: rows after it are kept for them. */
  private readonly readers = new Map<number, number>();
  private nextReader = 0;
  /** Whether this node writes the table alone and it has a full-text index. */
  readonly tracking: boolean;

  constructor(
    private readonly fts: readonly FtsIndex[],
    soleWriter: boolean,
    private readonly tokens: (texts: readonly (string | null)[], column: string) => Promise<string[][]>,
  ) {
    this.tracking = soleWriter && fts.length > 0;
    for (const f of fts) this.postings.set(f.column, new Map());
  }

  /** Whether a text search may read the indexes alone and this beside them. */
  get usable(): boolean {
    return this.tracking && this.foldedAt !== undefined;
  }

  /** Rows held (for tests). */
  get size(): number {
    return this.rows.size;
  }

  /** This node committed `version`: it removed the rows of `removed` and wrote those of `added`, with `texts`. */
  committed(version: number, removed: readonly bigint[], added: readonly bigint[], texts: ColumnTexts): void {
    if (this.tracking) this.queue.push({ version, removed, added, texts });
  }

  /**
   * A write of this node's may have committed without it being told (its commit failed or got no answer): until
   * the next fold, a row outside the indexes may be missing here, so searches read Lance's own way.
   */
  unsettled(): void {
    this.foldedAt = undefined;
  }

  /**
   * Every row committed up to `version` is in the full-text indexes: upkeep folded them, or a read of the indexes'
   * statistics at that version found none outside them.
   */
  folded(version: number): void {
    if (!this.tracking || (this.foldedAt !== undefined && version <= this.foldedAt)) return;
    this.foldedAt = version;
    if (this.draining === undefined) this.sweep();
  }

  /**
   * Starts a search's read: taken before its index read begins, so that the rows it needs here (those after the
   * fold that index covers) stay until it ends (`end`).
   */
  begin(): FreshRead | undefined {
    if (!this.usable) return undefined;
    const read = { since: this.foldedAt as number, id: this.nextReader++ };
    this.readers.set(read.id, read.since);
    return read;
  }

  end(read: FreshRead): void {
    this.readers.delete(read.id);
  }

  /**
   * The rows here written after the read's fold and matching a query's tokens over `column` (any of them, or all
   * under AND), each with its BM25 score over the live rows; the best `limit`, and every row tied with the last.
   */
  async search(
    read: FreshRead,
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
      const row = this.rows.get(key);
      const doc = row?.docs.get(column);
      if (row === undefined || doc === undefined || row.version <= read.since) continue;
      if (operator === 'AND' && !distinct.every((term) => doc.terms.has(term))) continue;
      scored.push({ key, value: bm25(query, doc.tokens, stats) });
    }
    scored.sort((a, b) => b.value - a.value || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const edge = scored[limit - 1]?.value;
    const kept = edge === undefined ? scored : scored.filter((s) => s.value >= edge);
    return { keys: kept.map((s) => s.key), values: kept.map((s) => s.value) };
  }

  /** The version up to which rows may go: covered by the last fold and by every search under way's. */
  private get sweepable(): number | undefined {
    if (this.foldedAt === undefined) return undefined;
    return Math.min(this.foldedAt, ...this.readers.values());
  }

  /** Counts in the commits queued, in order; one drain at a time. A commit that cannot be tokenized stays queued. */
  private drain(): Promise<void> {
    const drained = (this.draining ?? Promise.resolve()).then(async () => {
      while (this.queue.length > 0) {
        const commit = this.queue[0] as Commit;
        const below = this.sweepable;
        const docs = below !== undefined && commit.version <= below ? undefined : await this.documents(commit);
        this.queue.shift();
        for (const key of commit.removed) this.remove(key);
        if (docs !== undefined) this.add(commit, docs);
      }
      this.sweep();
    });
    const settled = drained.catch(() => undefined);
    this.draining = settled;
    settled.then(() => {
      if (this.draining === settled) this.draining = undefined;
    });
    return drained;
  }

  /**
   * Lets go of what no search needs: rows a fold covered (unless a search under way still reads them here), and
   * queued commits that wrote only such rows (their removals still apply). Not while a drain runs (it sweeps last).
   */
  private sweep(): void {
    const below = this.sweepable;
    if (below === undefined) return;
    while (this.queue.length > 0 && (this.queue[0] as Commit).version <= below) {
      for (const key of (this.queue.shift() as Commit).removed) this.remove(key);
    }
    for (const [key, row] of this.rows) if (row.version <= below) this.remove(key);
  }

  /** A commit's rows' documents by column, tokenized before anything here changes. */
  private async documents(commit: Commit): Promise<Map<string, Doc>[]> {
    const docs = commit.added.map(() => new Map<string, Doc>());
    for (const { column } of this.fts) {
      const tokens = await this.tokens(commit.texts.get(column) ?? [], column);
      tokens.forEach((row, i) => {
        if (row.length > 0) docs[i]?.set(column, { tokens: row, terms: new Set(row) });
      });
    }
    return docs;
  }

  private add(commit: Commit, docs: Map<string, Doc>[]): void {
    commit.added.forEach((key, i) => {
      // A replaced row's earlier text leaves first, so that its terms' postings keep the new one.
      this.remove(key);
      const byColumn = docs[i] as Map<string, Doc>;
      this.rows.set(key, { version: commit.version, docs: byColumn });
      for (const [column, doc] of byColumn) {
        const postings = this.postings.get(column) as Map<string, Set<bigint>>;
        for (const term of doc.terms) {
          let keys = postings.get(term);
          if (keys === undefined) {
            keys = new Set();
            postings.set(term, keys);
          }
          keys.add(key);
        }
      }
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
