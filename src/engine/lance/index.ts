// The Lance row source's one public module: the store the worker opens for a database, the process upkeep's heavy
// work runs in, and what Lance's refusals mean to the predicate checks. Everything else in this folder is its own.

export { isClosedTable, isMissingDataset, lanceMessage, PREDICATE_TIMEOUT_MS, storageFailure } from './lance.js';
export { LanceStore } from './store.js';
export { UpkeepProcess } from './upkeep-process.js';
