/**
 * The process upkeep's heavy Lance work runs in (`upkeep-process.ts` starts it at a lower CPU priority): training
 * ANN indexes and `optimize()`. It runs from the build (`dist/`), as the JSON thread does; it needs nothing but
 * Lance. Each request names its dataset and is answered when its commit is done; requests run side by side.
 */
import { connect, Index, type Table } from '@lancedb/lancedb';
import { lanceIndex } from './indexes.js';
import type { UpkeepReply, UpkeepRequest } from './upkeep-process.js';

/**
 * Each dataset stays open between jobs (by location and table) for as long as this process lives (its parent ends
 * it once idle): a fold or compaction remaps the table's indexes, and Lance reads them from its cache rather than
 * from storage again. `readConsistencyInterval: 0` makes every job start from the latest commit, whichever
 * process made it.
 */
interface OpenDataset {
  options: string;
  table: Promise<Table>;
  jobs: number;
}
const open = new Map<string, OpenDataset>();

/** Datasets kept open at most; the one least recently worked on, with no job running, is closed first. */
const MAX_OPEN = 16;

const closeLater = (table: Promise<Table>) =>
  table.then(
    (t) => t.close(),
    () => undefined,
  );

function dataset(request: UpkeepRequest): OpenDataset {
  const key = `${request.uri}\0${request.table}`;
  const options = JSON.stringify(request.storageOptions);
  let entry = open.get(key);
  open.delete(key); // set again below, as the most recently used
  // Renewed credentials come with new options: the dataset is opened again with them.
  if (entry === undefined || entry.options !== options) {
    if (entry !== undefined && entry.jobs === 0) closeLater(entry.table);
    const table = connect(request.uri, { storageOptions: request.storageOptions, readConsistencyInterval: 0 }).then(
      (connection) => connection.openTable(request.table),
    );
    const created: OpenDataset = { options, table, jobs: 0 };
    table.catch(() => open.get(key) === created && open.delete(key));
    entry = created;
  }
  open.set(key, entry);
  for (const [oldest, stale] of open) {
    if (open.size <= MAX_OPEN) break;
    if (stale.jobs > 0) continue;
    open.delete(oldest);
    closeLater(stale.table);
  }
  return entry;
}

async function perform(request: UpkeepRequest): Promise<void> {
  const entry = dataset(request);
  entry.jobs++;
  try {
    const table = await entry.table;
    const work = request.work;
    if (work.kind === 'ann') {
      const { distanceType, index } = work;
      const config =
        index.type === 'ivf_rq'
          ? Index.ivfRq({ distanceType, numBits: index.numBits })
          : Index.ivfFlat({ distanceType });
      await table.createIndex(work.column, { config, replace: work.replace });
    } else if (work.kind === 'index') {
      await table.createIndex(work.index.column, { config: lanceIndex(work.index), replace: work.replace });
    } else {
      await table.optimize({ cleanupOlderThan: work.cleanupOlderThan });
    }
  } finally {
    entry.jobs--;
  }
}

const answer = (reply: UpkeepReply) => {
  // The parent may be gone; its requests then die with this process.
  if (process.connected) process.send?.(reply);
};

process.on('message', (request: UpkeepRequest) => {
  perform(request).then(
    () => answer({ id: request.id, ok: true }),
    (err: unknown) => answer({ id: request.id, ok: false, message: err instanceof Error ? err.message : String(err) }),
  );
});

// Work in flight is abandoned with the parent: Lance commits atomically, so a dataset keeps its last commit. The
// process kills itself rather than exit, so no native thread goes on writing index files while exit hooks run.
process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));
