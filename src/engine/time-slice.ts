/**
 * How long a loop of JavaScript runs before it hands the event loop back. Every request of the node, every tenant's,
 * waits on one event loop: a loop over a million texts that never yields holds them all. 8 ms left searches of
 * another table twice as slow during a statistics build as 2 ms did (docs/performance.md, BM25 over the live rows).
 */
export const SLICE_MS = 2;

/**
 * A long loop's share of the event loop: `pause()` between steps lets what waits run (I/O, timers, other requests)
 * once the loop has run `ms` since it last did, and costs a clock read otherwise.
 */
export class TimeSlice {
  private since = performance.now();

  constructor(private readonly ms = SLICE_MS) {}

  async pause(): Promise<void> {
    if (performance.now() - this.since < this.ms) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.since = performance.now();
  }
}
