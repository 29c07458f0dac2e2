// @ts-check
/**
 * The process upkeep's heavy Lance work runs in (`upkeep-process.ts` starts it at a lower CPU priority): training
 * ANN indexes and `optimize()`. Plain JavaScript so that Node runs it as it is, from the sources under test and
 * from `dist/` alike; it needs nothing but Lance. Each request names its dataset and is answered when its commit
 * is done; requests run side by side.
 */
import { connect, Index } from '@lancedb/lancedb';

/**
 * @typedef {import('./upkeep-process.js').UpkeepRequest} UpkeepRequest
 * @typedef {import('./upkeep-process.js').UpkeepReply} UpkeepReply
 */

/** Datasets unused this long are closed, and their share of Lance's caches freed. */
const IDLE_MS = 60_000;

/**
 * Each dataset stays open between jobs (by location and table): a fold or compaction remaps the table's indexes,
 * and Lance reads them from its cache rather than from storage again. `readConsistencyInterval: 0` makes every job
 * start from the latest commit, whichever process made it.
 * @type {Map<string, { options: string, table: Promise<import('@lancedb/lancedb').Table>, usedAt: number }>}
 */
const open = new Map();

/** @param {UpkeepRequest} request */
function dataset(request) {
  const key = `${request.uri}\0${request.table}`;
  const options = JSON.stringify(request.storageOptions);
  let entry = open.get(key);
  // Renewed credentials come with new options: the dataset is opened again with them.
  if (entry === undefined || entry.options !== options) {
    if (entry !== undefined)
      entry.table.then(
        (table) => table.close(),
        () => undefined,
      );
    const table = connect(request.uri, { storageOptions: request.storageOptions, readConsistencyInterval: 0 }).then(
      (connection) => connection.openTable(request.table),
    );
    entry = { options, table, usedAt: Date.now() };
    open.set(key, entry);
    table.catch(() => open.delete(key));
  }
  entry.usedAt = Date.now();
  return entry.table;
}

setInterval(() => {
  for (const [key, entry] of open) {
    if (Date.now() - entry.usedAt < IDLE_MS) continue;
    open.delete(key);
    entry.table.then(
      (table) => table.close(),
      () => undefined,
    );
  }
}, IDLE_MS).unref();

/** @param {UpkeepRequest} request */
async function perform(request) {
  const table = await dataset(request);
  const work = request.work;
  if (work.kind === 'ann') {
    const config = Index.ivfRq({ distanceType: work.distanceType, numBits: work.numBits });
    await table.createIndex(work.column, { config, replace: work.replace });
  } else {
    await table.optimize({ cleanupOlderThan: work.cleanupOlderThan });
  }
}

/** @param {UpkeepReply} reply */
const answer = (reply) => {
  // The parent may be gone; its requests then die with this process.
  if (process.connected) process.send?.(reply);
};

process.on('message', (/** @type {UpkeepRequest} */ request) => {
  perform(request).then(
    () => answer({ id: request.id, ok: true }),
    (/** @type {unknown} */ err) =>
      answer({ id: request.id, ok: false, message: err instanceof Error ? err.message : String(err) }),
  );
});

// Work in flight is abandoned with the parent: Lance commits atomically, so a dataset keeps its last commit.
process.on('disconnect', () => process.exit(0));
