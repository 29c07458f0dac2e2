import { fsyncPath, GroupSync } from '../storage/durable.js';

/**
 * The fsync the embedded store's relaxed commits skipped, made when a write needs them to last a power cut
 * (`durable`): the WAL fsynced off the event loop, one fsync shared by whoever waits meanwhile.
 */
export class RelaxedCommits {
  private readonly walSync: GroupSync;
  /** Relaxed commits made, and how many of them an fsync is known to cover. */
  private made = 0;
  private synced = 0;

  constructor(wal: string) {
    this.walSync = new GroupSync(async () => {
      // The log exists while relaxed commits wait for it: gone, they would be durable in name only.
      if (!(await fsyncPath(wal))) throw new Error(`the control store's log ${wal} is missing`);
    });
  }

  committedRelaxed(): void {
    this.made++;
  }

  async durable(): Promise<void> {
    const upTo = this.made;
    if (upTo === this.synced) return;
    // Fsyncing the WAL is what FULL would have done after the commit; a checkpoint since syncs the file it copied to.
    await this.walSync.sync();
    this.synced = Math.max(this.synced, upTo);
  }
}
