/**
 * npm run bench:relevance — how close Strata's text search comes to a standard multi-field, stemmed BM25 on real
 * text: Debian's package list (name, section, summary and debtags of each of ~63,000 packages), read from apt's
 * cache (`/var/lib/apt/lists/*_Packages.lz4`: run `apt-get update` first; decompressed with `lz4`).
 *
 * The reference is written here the way Lucene and Elasticsearch score a `multi_match` of type `most_fields`:
 * Unicode word segmentation (the `standard` tokenizer), lowercase, Lucene's English stop words, an English
 * stemmer (Snowball's, as Lance's tokenizer applies it word by word), BM25 as Lucene computes it
 * (idf ln(1 + (N − n + 0.5)/(n + 0.5)), tf / (tf + k1·(1 − b + b·dl/avgdl)), k1 1.2, b 0.75), and the sum of each
 * field's score times its boost. Strata answers the same 25 everyday queries three ways: one field without
 * stemming (the service before `text_fields` and analyzers), and `text_fields` under `english`. The figure is
 * the share of the reference's top 10 in Strata's top 10, averaged over the queries; with the p50 latency of each
 * way over HTTP. BENCH_QUERIES_ROUNDS (default 5) repeats the queries for the latencies.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@lancedb/lancedb';
import { ftsIndex } from '../src/engine/lance/indexes.js';
import { activeDatabase, percentile, removeDataDir, saveResults, startServer, untilIndexed } from './harness.js';

const ROUNDS = Number(process.env.BENCH_QUERIES_ROUNDS ?? 5);
const LISTS = '/var/lib/apt/lists';

const QUERIES = [
  'image viewer',
  'pdf reader',
  'password manager',
  'text editor',
  'web browser',
  'music player',
  'video editor',
  'email client',
  'file manager',
  'screen recorder',
  'terminal emulator',
  'spreadsheet',
  'photo editing',
  'disk usage',
  'network monitor',
  'backup tool',
  'chat client',
  'ebook reader',
  'audio converter',
  'font viewer',
  'diagram editor',
  'bittorrent client',
  'calendar',
  'note taking',
  'screenshot tool',
];

/** Lucene's English stop words (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`). */
const STOP = new Set(
  'a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with'.split(
    ' ',
  ),
);

interface Package {
  name: string;
  summary: string;
  /** Name, section and debtags as words: what a package is about beside its summary. */
  about: string;
}

/** Every package of Debian's main archive for amd64, from apt's cache. */
function packages(): Package[] {
  const file = readdirSync(LISTS).find(
    (f) => /_main_binary-amd64_Packages\.lz4$/.test(f) && !/security|updates/.test(f),
  );
  if (file === undefined) throw new Error(`no Packages list in ${LISTS}: run apt-get update`);
  const text = execFileSync('lz4', ['-dc', join(LISTS, file)], { maxBuffer: 1 << 30 }).toString('utf8');
  const out: Package[] = [];
  for (const stanza of text.split('\n\n')) {
    const field = (name: string) =>
      new RegExp(`^${name}: (.*(?:\\n .*)*)`, 'm').exec(stanza)?.[1]?.replace(/\n /g, ' ');
    const name = field('Package');
    const summary = field('Description');
    if (name === undefined || summary === undefined) continue;
    const words = (s: string | undefined) => (s ?? '').replace(/[:,/_-]+/g, ' ');
    out.push({ name, summary, about: `${words(name)} ${words(field('Section'))} ${words(field('Tag'))}` });
  }
  return out;
}

const segmenter = new Intl.Segmenter('en', { granularity: 'word' });

/** The reference's analyzer: standard tokenizer, lowercase, English stop words, a stem per word. */
function analyzer(stem: (word: string) => string): (text: string) => string[] {
  return (text) =>
    [...segmenter.segment(text)]
      .filter((s) => s.isWordLike)
      .map((s) => s.segment.toLowerCase().replace(/'s$/, ''))
      .filter((w) => w !== '' && !STOP.has(w))
      .map(stem);
}

/** One field's BM25 as Lucene scores it, over every document. */
class Field {
  private readonly df = new Map<string, number>();
  private readonly lengths: number[];
  private readonly avg: number;
  constructor(private readonly docs: readonly string[][]) {
    for (const doc of docs) for (const term of new Set(doc)) this.df.set(term, (this.df.get(term) ?? 0) + 1);
    this.lengths = docs.map((d) => d.length);
    this.avg = this.lengths.reduce((a, b) => a + b, 0) / docs.length;
  }
  score(query: readonly string[], into: Float64Array, boost: number): void {
    const n = this.docs.length;
    for (const term of new Set(query)) {
      const df = this.df.get(term) ?? 0;
      if (df === 0) continue;
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
      this.docs.forEach((doc, i) => {
        let tf = 0;
        for (const t of doc) if (t === term) tf++;
        if (tf === 0) return;
        const norm = 1.2 * (0.25 + (0.75 * (this.lengths[i] as number)) / this.avg);
        into[i] = (into[i] as number) + boost * idf * (tf / (tf + norm));
      });
    }
  }
}

function top10(scores: Float64Array): number[] {
  return [...scores.keys()]
    .filter((i) => (scores[i] as number) > 0)
    .sort((a, b) => (scores[b] as number) - (scores[a] as number) || a - b)
    .slice(0, 10);
}

async function main(): Promise<void> {
  console.log('reading Debian package list…');
  const rows = packages();
  console.log(`${rows.length} packages`);

  // Snowball's English stem of each distinct word, as Lance's tokenizer makes it.
  const scratch = mkdtempSync(join(tmpdir(), 'strata-relevance-'));
  const lance = await connect(scratch);
  const words = await lance.createTable('w', [{ body: 'x' }]);
  await words.createIndex('body', {
    config: ftsIndex({ tokenizer: 'simple', lowercase: true, ascii_folding: false, stem: 'english', stop_words: null }),
  });
  const stems = new Map<string, string>();
  const plain = analyzer((w) => w);
  for (const text of [...rows.flatMap((r) => [r.summary, r.about]), ...QUERIES]) {
    for (const word of plain(text)) {
      if (stems.has(word)) continue;
      const [token] = await words.tokenize(word, { column: 'body' });
      stems.set(word, token?.text ?? word);
    }
  }
  lance.close();
  const analyze = analyzer((w) => stems.get(w) ?? w);
  const summary = new Field(rows.map((r) => analyze(r.summary)));
  const about = new Field(rows.map((r) => analyze(r.about)));
  const reference = (query: string) => {
    const scores = new Float64Array(rows.length);
    const q = analyze(query);
    summary.score(q, scores, 2);
    about.score(q, scores, 1);
    return top10(scores);
  };

  const dataDir = mkdtempSync(join(tmpdir(), 'strata-bench-'));
  const server = await startServer(dataDir);
  await activeDatabase(server, 'deb');
  const schema = [
    { name: 'id', type: 'i32' },
    { name: 'summary', type: 'utf8' },
    { name: 'about', type: 'utf8' },
  ];
  const create = (table: string, analyzer: string) =>
    server.post(
      '/v1/create_table/deb',
      JSON.stringify({
        table_name: table,
        schema,
        indexes: {
          fts: [
            { column: 'summary', analyzer },
            { column: 'about', analyzer },
          ],
        },
      }),
    );
  await create('plain', 'ascii_lower');
  await create('stemmed', 'english');
  for (const table of ['plain', 'stemmed']) {
    for (let at = 0; at < rows.length; at += 10_000) {
      const data = rows.slice(at, at + 10_000).map((r, i) => ({ id: at + i, summary: r.summary, about: r.about }));
      await server.post(`/v1/append/deb?table=${table}`, JSON.stringify({ data }), {
        'content-type': 'application/json',
        prefer: 'return=minimal',
      });
    }
  }
  await untilIndexed(dataDir, 'deb');

  const ask = async (body: object) => {
    const started = performance.now();
    const reply = JSON.parse(
      (
        await server.post('/v1/hybrid_search/deb', JSON.stringify({ k: 10, projection: ['id'], ...body }), {
          'content-type': 'application/json',
          accept: 'application/json',
        })
      ).toString(),
    ) as { data: { id: number }[] };
    return { ids: reply.data.map((r) => r.id), ms: performance.now() - started };
  };
  const ways = {
    one_field_no_stemming: (q: string) => ask({ table_name: 'plain', text_query: q, text_field: 'summary' }),
    text_fields_no_stemming: (q: string) =>
      ask({
        table_name: 'plain',
        text_query: q,
        text_fields: [{ field: 'summary', boost: 2 }, { field: 'about' }],
      }),
    text_fields_english: (q: string) =>
      ask({
        table_name: 'stemmed',
        text_query: q,
        text_fields: [{ field: 'summary', boost: 2 }, { field: 'about' }],
      }),
  };
  const results: Record<string, unknown> = { packages: rows.length, queries: QUERIES.length };
  for (const [way, run] of Object.entries(ways)) {
    let shared = 0;
    let wanted = 0;
    const latencies: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const query of QUERIES) {
        const { ids, ms } = await run(query);
        latencies.push(ms);
        if (round > 0) continue;
        const want = reference(query);
        shared += want.filter((id) => ids.includes(id)).length;
        wanted += want.length;
      }
    }
    latencies.sort((a, b) => a - b);
    results[way] = {
      top10_agreement: Number((shared / wanted).toFixed(3)),
      p50_ms: Number(percentile(latencies, 50).toFixed(2)),
      p99_ms: Number(percentile(latencies, 99).toFixed(2)),
    };
  }
  saveResults('relevance', results);
  await server.stop();
  removeDataDir(dataDir);
  removeDataDir(scratch);
}

await main();
