/**
 * What one node tells the others through the control store (PostgreSQL's LISTEN/NOTIFY; within the process for
 * the embedded store). `resync`: notices may have been lost (the listener reconnected); check what you hold.
 */
export type ControlEvent =
  | { kind: 'database_gone'; databaseId: string }
  /** A database's deletion began: no call is admitted on it any more, and its worker is let go once drained. */
  | { kind: 'database_deleting'; databaseId: string }
  | { kind: 'key_revoked'; hash: string }
  | { kind: 'resync' };

export type ControlListener = (event: ControlEvent) => void;

/** The listeners of a store's events; a listener that throws does not stop the others. */
export class ControlEvents {
  private readonly listeners = new Set<ControlListener>();

  on(listener: ControlListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: ControlEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // One listener's fault is its own.
      }
    }
  }
}
