/**
 * A deterministic synthetic corpus for the search benchmark: texts of 6–20 words from a 5,000-word Zipf
 * vocabulary, and 384-d float32 vectors from a low-dimensional latent model (topics) plus noise, so that
 * neighbours exist and an ANN index has structure to find, unlike uniform noise.
 */
export const DIM = 384;
const LATENT = 12;
const VOCAB = 5_000;

export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const gaussian = (rand: () => number) => Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'te', 'vo', 'zi', 'ba', 'do', 'fe', 'gu', 'hi', 'jo', 'pe'];

/** The vocabulary, most frequent first. */
export const WORDS: string[] = Array.from({ length: VOCAB }, (_, i) => {
  let n = i + 1;
  let word = '';
  while (n > 0) {
    word += SYLLABLES[n % SYLLABLES.length];
    n = Math.floor(n / SYLLABLES.length);
  }
  return word;
});

const ZIPF_CDF = (() => {
  const weights = WORDS.map((_, i) => 1 / (i + 1) ** 1.07);
  const total = weights.reduce((a, b) => a + b, 0);
  let acc = 0;
  return Float64Array.from(weights, (w) => (acc += w / total));
})();

function zipfWord(rand: () => number): string {
  const u = rand();
  let lo = 0;
  let hi = ZIPF_CDF.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((ZIPF_CDF[mid] ?? 1) < u) lo = mid + 1;
    else hi = mid;
  }
  return WORDS[lo] as string;
}

export interface Corpus {
  texts: string[];
  /** Row-major, `DIM` floats per row. */
  vectors: Float32Array;
}

/** The mixing matrix of the latent model, fixed by the seed so rows and queries share it. */
const MIX = (() => {
  const rand = rng(7);
  return Float32Array.from({ length: DIM * LATENT }, () => gaussian(rand) / Math.sqrt(LATENT));
})();

/** One vector of the model into `out` at `at`: a mixture of latent topics plus a little noise. */
function vectorInto(rand: () => number, out: Float32Array, at: number): void {
  const z = Array.from({ length: LATENT }, () => gaussian(rand));
  for (let d = 0; d < DIM; d++) {
    let v = 0.15 * gaussian(rand);
    for (let l = 0; l < LATENT; l++) v += (MIX[d * LATENT + l] ?? 0) * (z[l] ?? 0);
    out[at + d] = v;
  }
}

export function makeCorpus(rows: number, seed: number): Corpus {
  const rand = rng(seed);
  const texts = new Array<string>(rows);
  const vectors = new Float32Array(rows * DIM);
  for (let i = 0; i < rows; i++) {
    const n = 6 + Math.floor(rand() * 15);
    texts[i] = Array.from({ length: n }, () => zipfWord(rand)).join(' ');
    vectorInto(rand, vectors, i * DIM);
  }
  return { texts, vectors };
}

export function makeQueries(count: number, seed: number): { texts: string[]; vectors: number[][] } {
  const rand = rng(seed);
  const one = new Float32Array(DIM);
  return {
    // Two mid-frequency words: selective enough to rank, common enough to have many hits.
    texts: Array.from(
      { length: count },
      () => `${WORDS[20 + Math.floor(rand() * 400)]} ${WORDS[20 + Math.floor(rand() * 400)]}`,
    ),
    vectors: Array.from({ length: count }, () => {
      vectorInto(rand, one, 0);
      return Array.from(one);
    }),
  };
}

/** Exact top-k by squared L2 over the corpus (ties by row order), for recall. */
export function exactTopK(vectors: Float32Array, query: readonly number[], k: number): number[] {
  const rows = vectors.length / DIM;
  const best: { id: number; d: number }[] = [];
  const q = Float32Array.from(query);
  for (let i = 0; i < rows; i++) {
    let d = 0;
    const base = i * DIM;
    for (let j = 0; j < DIM; j++) {
      const diff = (vectors[base + j] ?? 0) - (q[j] ?? 0);
      d += diff * diff;
    }
    if (best.length < k || d < (best[best.length - 1]?.d ?? Infinity)) {
      best.push({ id: i, d });
      best.sort((a, b) => a.d - b.d || a.id - b.id);
      if (best.length > k) best.pop();
    }
  }
  return best.map((b) => b.id);
}
