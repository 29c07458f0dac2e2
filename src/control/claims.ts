import { Conflict, LimitExceeded } from '../errors.js';
import type { Binding } from '../storage/binding.js';
import { describeLocation, locationOf, overlaps } from '../storage/location.js';

/**
 * Refuses a binding whose location is, contains or lies inside one already bound (docs/api.md): otherwise one
 * account could bind another's folder or bucket and read, overwrite or purge its tables. Every control store
 * runs this inside the transaction that inserts the database.
 */
export function assertLocationFree(binding: Binding, bound: readonly Binding[]): void {
  const wanted = locationOf(binding);
  if (bound.some((other) => overlaps(wanted, locationOf(other)))) {
    throw new Conflict(
      `the ${describeLocation(wanted)} is already bound by another database, or overlaps one that is; choose another bucket or prefix`,
      { code: 'location_in_use' },
    );
  }
}

export const databaseLimit = (held: number): LimitExceeded =>
  new LimitExceeded(
    `this account already holds ${held} databases, the most one account may (STRATA_MAX_DATABASES_PER_ACCOUNT); delete one first`,
  );
