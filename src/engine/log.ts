/** Where the engine reports what it handled on its own (a failed upkeep pass, a torn manifest set aside). */
export interface EngineLog {
  warn(details: object, message: string): void;
}
