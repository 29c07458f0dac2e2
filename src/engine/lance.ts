// What predicate/predicate.ts reads of Lance's refusals, until it imports them from ./lance/index.js itself (its
// owner's change to make); nothing else imports this module.
export { isClosedTable, isMissingDataset, lanceMessage, PREDICATE_TIMEOUT_MS } from './lance/index.js';
