import { inject } from 'vitest';
import { freshDatabase } from './postgres-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The test run's PostgreSQL server, as a URL without a database. */
    pgServerUrl: string;
  }
}

/** A new database on the test run's PostgreSQL server (started once by the global setup). */
export const freshControlUrl = (): Promise<string> => freshDatabase(inject('pgServerUrl'));
