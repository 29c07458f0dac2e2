import { randomBytes, randomUUID } from 'node:crypto';
import { asStorageError, type ObjectStore } from './objects.js';

export type VerifyStep = 'credentials' | 'put' | 'get' | 'list' | 'conditional_put' | 'delete';

export interface VerifyCheckResult {
  step: VerifyStep;
  ok: boolean;
  ms: number;
  note?: string;
}

export type VerifyOutcome =
  | { ok: true; checks: VerifyCheckResult[] }
  | { ok: false; checks: VerifyCheckResult[]; step: VerifyStep; code: string; message: string };

/** Where the service keeps its own objects inside the binding prefix. */
const SERVICE_PREFIX = '_strata';

const elapsed = (start: bigint): number => Number((process.hrtime.bigint() - start) / 1000n) / 1000;

/**
 * Proves a grant end to end (docs/api.md): credentials → put → get (bytes compared) → list → conditional_put
 * → delete, each step timed. Stops at the first failing step. A store that ignores put-if-absent is
 * reported (`ok: false` with a note) but does not fail verification.
 */
export async function verifyObjects(store: ObjectStore): Promise<VerifyOutcome> {
  const checks: VerifyCheckResult[] = [];
  const key = `${SERVICE_PREFIX}/verify/${randomUUID()}.probe`;
  const bytes = new Uint8Array(randomBytes(64));

  const steps: readonly [VerifyStep, () => Promise<string | undefined>][] = [
    ['credentials', async () => void (await store.checkCredentials())],
    ['put', async () => void (await store.put(key, bytes))],
    [
      'get',
      async () => {
        const back = await store.get(key);
        if (Buffer.compare(Buffer.from(back), Buffer.from(bytes)) !== 0) {
          throw Object.assign(new Error('the object read back differs from the one written'), { code: 'BytesDiffer' });
        }
        return undefined;
      },
    ],
    [
      'list',
      async () => {
        const listed = await store.list(`${SERVICE_PREFIX}/verify`);
        if (!listed.includes(key)) {
          throw Object.assign(new Error('the probe object is missing from the listing'), { code: 'NotListed' });
        }
        return undefined;
      },
    ],
    [
      'conditional_put',
      async () =>
        (await store.putIfAbsent(key, bytes)) === 'refused'
          ? undefined
          : 'the store ignored a put-if-absent (If-None-Match: *): writes to one table from several nodes at once are not safe on it (one node writing at a time is)',
    ],
    ['delete', async () => void (await store.delete(key))],
  ];

  for (const [step, run] of steps) {
    const start = process.hrtime.bigint();
    try {
      const note = await run();
      checks.push({ step, ok: note === undefined, ms: elapsed(start), ...(note === undefined ? {} : { note }) });
    } catch (err) {
      // Stores report what is safe to show: S3 turns every failure below the protocol into the fixed
      // `EndpointUnreachable` sentence (asRemoteStorageError), so the step's note is no probe of the network.
      const failure = asStorageError(err);
      checks.push({ step, ok: false, ms: elapsed(start), note: `${failure.code}: ${failure.message}` });
      // Leave no probe behind when a later step fails.
      if (step !== 'credentials' && step !== 'put') await store.delete(key).catch(() => undefined);
      return { ok: false, checks, step, code: failure.code, message: failure.message };
    }
  }
  return { ok: true, checks };
}
