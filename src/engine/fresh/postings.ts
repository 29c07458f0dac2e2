import type { TextOperator } from '../rows/source.js';
import { type CollectionStatistics, idfOf, lengthNorm, termScore } from '../text/bm25.js';

/** Room the first growth of the rows' arrays makes. */
const FIRST_ROWS = 1024;

/** One term's rows, as row numbers with the term's frequency in each (a removed row's entry stays until a pack). */
interface Posting {
  rows: Int32Array;
  tfs: Int32Array;
  size: number;
  /** Live rows holding the term. */
  live: number;
}

/**
 * One full-text column of the fresh rows, scored a query term at a time: each term's rows with its frequency in
 * each, and each row's number of tokens and the version that wrote it. A query adds every term's weight into one
 * score per row, walking the postings of its terms alone (105k rows of bench:search: ~5 ms a query when each
 * candidate row's tokens were counted, a map of bigint keys between). Rows are numbered here; a removed row leaves
 * its number and its postings' entries dead until dead rows outnumber live ones, when all are packed. A term's id
 * goes back for reuse once no live row holds it, so the dictionary holds only live terms.
 */
export class FreshPostings {
  private readonly ids = new Map<string, number>();
  /** Each id's term; empty where the id is free. */
  private readonly terms: string[] = [];
  private readonly free: number[] = [];
  private postings: (Posting | undefined)[] = [];
  /** Each live row's number. */
  private readonly numbers = new Map<bigint, number>();
  /**
   * Per row number: its key (undefined once removed), tokens, version, and its distinct terms with frequencies as
   * pairs in one array (two arrays a row took a fifth more heap).
   */
  private keys: (bigint | undefined)[] = [];
  private lengths = new Int32Array(FIRST_ROWS);
  private versions = new Float64Array(FIRST_ROWS);
  private termsOf: (Int32Array | undefined)[] = [];
  /** Per row number, scratch of a search: its score so far, and how many distinct query terms it holds. */
  private scores = new Float64Array(FIRST_ROWS);
  private matched = new Int32Array(FIRST_ROWS);
  private seen = new Uint8Array(FIRST_ROWS);
  /** Per version that wrote live rows here: how many, and their tokens (for statistics of the rows after a fold). */
  private readonly byVersion = new Map<number, { docs: number; tokens: number }>();
  /** Scratch of `add`: per term id, 1 + where the row being added counts it in `pairs` (0: not yet). */
  private slotOf = new Int32Array(FIRST_ROWS);
  private pairs = new Int32Array(64);

  /** Holds `tokens` for `key`, written at `version` (the key must not be held). */
  add(key: bigint, tokens: readonly string[], version: number): void {
    // The row's distinct terms and their frequencies, gathered in scratch: a map and arrays per row made this
    // cost 18 µs a row of 13 tokens, against 7 µs.
    let distinct = 0;
    for (const token of tokens) {
      let id = this.ids.get(token);
      if (id === undefined) {
        id = this.free.pop() ?? this.terms.length;
        this.ids.set(token, id);
        this.terms[id] = token;
      }
      if (id >= this.slotOf.length) this.slotOf = grown(this.slotOf, Math.max(2 * this.slotOf.length, id + 1));
      const slot = this.slotOf[id] as number;
      if (slot > 0) {
        this.pairs[2 * slot - 1] = (this.pairs[2 * slot - 1] as number) + 1;
        continue;
      }
      if (2 * distinct + 2 > this.pairs.length) this.pairs = grown(this.pairs, 2 * this.pairs.length);
      this.pairs[2 * distinct] = id;
      this.pairs[2 * distinct + 1] = 1;
      distinct++;
      this.slotOf[id] = distinct;
    }
    const terms = this.pairs.slice(0, 2 * distinct);
    const row = this.keys.length;
    if (row === this.lengths.length) this.grow(2 * row);
    this.keys.push(key);
    this.numbers.set(key, row);
    this.lengths[row] = tokens.length;
    this.versions[row] = version;
    this.termsOf.push(terms);
    for (let i = 0; i < terms.length; i += 2) {
      this.slotOf[terms[i] as number] = 0;
      this.post(terms[i] as number, row, terms[i + 1] as number);
    }
    if (tokens.length > 0) this.counted(version, 1, tokens.length);
  }

  remove(key: bigint): void {
    const row = this.numbers.get(key);
    if (row === undefined) return;
    this.numbers.delete(key);
    this.keys[row] = undefined;
    if ((this.lengths[row] as number) > 0)
      this.counted(this.versions[row] as number, -1, -(this.lengths[row] as number));
    const terms = this.termsOf[row] ?? new Int32Array(0);
    for (let i = 0; i < terms.length; i += 2) {
      const id = terms[i] as number;
      const posting = this.postings[id] as Posting;
      if (--posting.live > 0) continue;
      this.postings[id] = undefined;
      this.ids.delete(this.terms[id] as string);
      this.terms[id] = '';
      this.free.push(id);
    }
    this.termsOf[row] = undefined;
    if (this.keys.length - this.numbers.size > Math.max(FIRST_ROWS, this.numbers.size)) this.pack();
  }

  /**
   * The held rows written after version `since` that match a query's tokens (any of them, or all under AND), each
   * with its BM25 score under `stats`; the best `limit`, and every row tied with the last (ties by key). Each row's
   * score adds its terms' weights in the query's order, as `bm25Scorer` does, so both give the same bits.
   */
  search(
    query: readonly string[],
    operator: TextOperator,
    stats: CollectionStatistics,
    limit: number,
    since: number,
  ): { keys: bigint[]; values: number[] } {
    const none = { keys: [], values: [] };
    // A query token no row here holds matches nothing here, and under AND no row at all.
    const known = query.map((token) => this.ids.get(token) ?? -1);
    if (operator === 'AND' && known.some((id) => id < 0)) return none;
    if (stats.docs === 0 || limit <= 0) return none;
    const distinct = new Set(known.filter((id) => id >= 0));
    const idf = new Map<number, number>();
    for (const id of distinct) idf.set(id, idfOf(stats.docsWith(this.terms[id] as string), stats.docs));
    const { scores, matched, seen, lengths, versions, keys } = this;
    const touched: number[] = [];
    const counted = new Set<number>();
    for (const id of known) {
      const posting = id < 0 ? undefined : this.postings[id];
      if (posting === undefined) continue;
      const weight = idf.get(id) as number;
      const first = !counted.has(id);
      counted.add(id);
      const { rows, tfs, size } = posting;
      for (let i = 0; i < size; i++) {
        const row = rows[i] as number;
        if (keys[row] === undefined || (versions[row] as number) <= since) continue;
        if (seen[row] === 0) {
          seen[row] = 1;
          touched.push(row);
        }
        scores[row] =
          (scores[row] as number) + termScore(weight, tfs[i] as number, lengthNorm(lengths[row] as number, stats));
        if (first) matched[row] = (matched[row] as number) + 1;
      }
    }
    const wanted = operator === 'AND' ? distinct.size : 1;
    const hits = touched.filter((row) => (matched[row] as number) >= wanted);
    const edge = kthLargest(
      Float64Array.from(hits, (row) => scores[row] as number),
      limit,
    );
    const kept = hits.filter((row) => (scores[row] as number) >= edge);
    kept.sort((a, b) => {
      const by = (scores[b] as number) - (scores[a] as number);
      if (by !== 0) return by;
      const ka = keys[a] as bigint;
      const kb = keys[b] as bigint;
      return ka < kb ? -1 : ka > kb ? 1 : 0;
    });
    const result = { keys: kept.map((row) => keys[row] as bigint), values: kept.map((row) => scores[row] as number) };
    for (const row of touched) {
      scores[row] = 0;
      matched[row] = 0;
      seen[row] = 0;
    }
    return result;
  }

  /**
   * BM25's statistics of the held rows written after version `since`, for the terms of `query`: what a full-text
   * index that covers every other live row lacks of the live rows' statistics.
   */
  statisticsAfter(since: number, query: readonly string[]): CollectionStatistics {
    let docs = 0;
    let tokens = 0;
    for (const [version, count] of this.byVersion) {
      if (version <= since) continue;
      docs += count.docs;
      tokens += count.tokens;
    }
    const holding = new Map<string, number>();
    for (const term of query) {
      if (holding.has(term)) continue;
      const posting = this.postings[this.ids.get(term) ?? -1];
      let n = 0;
      for (let i = 0; i < (posting?.size ?? 0); i++) {
        const row = posting?.rows[i] as number;
        if (this.keys[row] !== undefined && (this.versions[row] as number) > since) n++;
      }
      holding.set(term, n);
    }
    return { docs, tokens, docsWith: (term) => holding.get(term) ?? 0 };
  }

  private counted(version: number, docs: 1 | -1, tokens: number): void {
    const count = this.byVersion.get(version) ?? { docs: 0, tokens: 0 };
    count.docs += docs;
    count.tokens += tokens;
    if (count.docs === 0) this.byVersion.delete(version);
    else this.byVersion.set(version, count);
  }

  private post(id: number, row: number, tf: number): void {
    let posting = this.postings[id];
    if (posting === undefined) {
      posting = { rows: new Int32Array(4), tfs: new Int32Array(4), size: 0, live: 0 };
      this.postings[id] = posting;
    }
    if (posting.size === posting.rows.length) {
      const rows = new Int32Array(2 * posting.size);
      const tfs = new Int32Array(2 * posting.size);
      rows.set(posting.rows);
      tfs.set(posting.tfs);
      posting.rows = rows;
      posting.tfs = tfs;
    }
    posting.rows[posting.size] = row;
    posting.tfs[posting.size] = tf;
    posting.size++;
    posting.live++;
  }

  private grow(rows: number): void {
    const grown = <T extends Int32Array | Float64Array>(old: T, make: (n: number) => T): T => {
      const array = make(rows);
      array.set(old);
      return array;
    };
    this.lengths = grown(this.lengths, (n) => new Int32Array(n));
    this.versions = grown(this.versions, (n) => new Float64Array(n));
    this.scores = new Float64Array(rows);
    this.matched = new Int32Array(rows);
    this.seen = new Uint8Array(rows);
  }

  /** Numbers the live rows again from 0, and makes every term's postings anew from them. */
  private pack(): void {
    const old = {
      keys: this.keys,
      lengths: this.lengths,
      versions: this.versions,
      terms: this.termsOf,
    };
    const rows = Math.max(FIRST_ROWS, 2 * this.numbers.size);
    this.keys = [];
    this.termsOf = [];
    this.lengths = new Int32Array(rows);
    this.versions = new Float64Array(rows);
    this.scores = new Float64Array(rows);
    this.matched = new Int32Array(rows);
    this.seen = new Uint8Array(rows);
    this.postings = [];
    old.keys.forEach((key, from) => {
      if (key === undefined) return;
      const row = this.keys.length;
      const terms = old.terms[from] as Int32Array;
      this.keys.push(key);
      this.numbers.set(key, row);
      this.lengths[row] = old.lengths[from] as number;
      this.versions[row] = old.versions[from] as number;
      this.termsOf.push(terms);
      for (let i = 0; i < terms.length; i += 2) this.post(terms[i] as number, row, terms[i + 1] as number);
    });
  }
}

/** `old`'s values at the start of a zeroed array of `length`. */
function grown(old: Int32Array, length: number): Int32Array<ArrayBuffer> {
  const array = new Int32Array(length);
  array.set(old);
  return array;
}

/**
 * The `k`-th largest of `values` (which it reorders), by quickselect; every value when there are `k` or fewer
 * (−∞ then, so that all are kept).
 */
function kthLargest(values: Float64Array, k: number): number {
  if (values.length <= k) return Number.NEGATIVE_INFINITY;
  let lo = 0;
  let hi = values.length - 1;
  const target = k - 1;
  while (lo < hi) {
    const pivot = values[(lo + hi) >>> 1] as number;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while ((values[i] as number) > pivot) i++;
      while ((values[j] as number) < pivot) j--;
      if (i <= j) {
        const t = values[i] as number;
        values[i] = values[j] as number;
        values[j] = t;
        i++;
        j--;
      }
    }
    if (target <= j) hi = j;
    else if (target >= i) lo = i;
    else break;
  }
  return values[target] as number;
}
