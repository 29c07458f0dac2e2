/** How often a load not on a terminal prints a progress line. */
const LINE_EVERY_MS = 2000;

const number = (n: number) => Math.round(n).toLocaleString('en-US');
const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/**
 * A load's progress on stderr: a bar redrawn in place on a terminal (rows, bytes, rows/s, ETA when the total is
 * known), a plain line every two seconds otherwise, and a last line with the totals either way.
 */
export class Progress {
  rows = 0;
  bytes = 0;
  private readonly started = performance.now();
  private lastLine = 0;
  private readonly tty = process.stderr.isTTY === true;

  constructor(private readonly total: number | undefined) {}

  update(rows: number, bytes: number): void {
    this.rows = rows;
    this.bytes = bytes;
    const now = performance.now();
    if (!this.tty && now - this.lastLine < LINE_EVERY_MS) return;
    this.lastLine = now;
    const seconds = (now - this.started) / 1000;
    const rate = seconds > 0 ? rows / seconds : 0;
    const eta = this.total !== undefined && rate > 0 ? ` ETA ${Math.ceil((this.total - rows) / rate)} s` : '';
    const of = this.total === undefined ? '' : `/${number(this.total)}`;
    const figures = `${number(rows)}${of} rows  ${megabytes(bytes)}  ${number(rate)} rows/s${eta}`;
    if (!this.tty) {
      process.stderr.write(`loading: ${figures}\n`);
      return;
    }
    const width = 30;
    const filled =
      this.total === undefined || this.total === 0 ? 0 : Math.min(width, Math.round((rows / this.total) * width));
    process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${figures}\u001b[K`);
  }

  finish(replayed: number): void {
    const seconds = (performance.now() - this.started) / 1000;
    const skipped =
      replayed === 0 ? '' : `; ${replayed} request${replayed === 1 ? ' had' : 's had'} landed before and were skipped`;
    if (this.tty) process.stderr.write('\n');
    process.stderr.write(
      `loaded ${number(this.rows)} rows (${megabytes(this.bytes)}) in ${seconds.toFixed(1)} s, ${number(this.rows / Math.max(seconds, 0.001))} rows/s${skipped}\n`,
    );
  }
}
