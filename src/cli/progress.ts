/** How often a load not on a terminal prints a progress line. */
const LINE_EVERY_MS = 2000;

const number = (n: number) => Math.round(n).toLocaleString('en-US');
const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/**
 * A load's progress on stderr: a bar redrawn in place on a terminal (rows, bytes, rows/s, ETA when the total is
 * known), a plain line every two seconds otherwise, and a last line with the totals either way: what landed now,
 * what had landed before, or, after Ctrl-C, how far it got.
 */
export class Progress {
  /** Rows that are in the table: sent now, or found there from an earlier run. */
  private rows = 0;
  private skipped = 0;
  private bytes = 0;
  private readonly started = performance.now();
  private lastLine = 0;
  private readonly tty = process.stderr.isTTY === true;

  constructor(private readonly total: number | undefined) {}

  /** A request's rows are in the table; `before` when an earlier run had landed them. */
  landed(rows: number, bytes: number, before: boolean): void {
    this.rows += rows;
    if (before) this.skipped += rows;
    else this.bytes += bytes;
    const now = performance.now();
    if (!this.tty && now - this.lastLine < LINE_EVERY_MS) return;
    this.lastLine = now;
    const seconds = (now - this.started) / 1000;
    const rate = seconds > 0 ? this.rows / seconds : 0;
    const eta = this.total !== undefined && rate > 0 ? ` ETA ${Math.ceil((this.total - this.rows) / rate)} s` : '';
    const of = this.total === undefined ? '' : `/${number(this.total)}`;
    const figures = `${number(this.rows)}${of} rows  ${megabytes(this.bytes)}  ${number(rate)} rows/s${eta}`;
    if (!this.tty) {
      process.stderr.write(`loading: ${figures}\n`);
      return;
    }
    const width = 30;
    const filled =
      this.total === undefined || this.total === 0 ? 0 : Math.min(width, Math.round((this.rows / this.total) * width));
    process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${figures}\u001b[K`);
  }

  finish(): void {
    const seconds = (performance.now() - this.started) / 1000;
    const sent = this.rows - this.skipped;
    if (this.tty) process.stderr.write('\n');
    if (sent === 0 && this.skipped > 0) {
      process.stderr.write(
        `nothing new: all ${number(this.skipped)} rows had landed before (${seconds.toFixed(1)} s)\n`,
      );
      return;
    }
    const before = this.skipped === 0 ? '' : `; ${number(this.skipped)} of them had landed before and were skipped`;
    process.stderr.write(
      `loaded ${number(this.rows)} rows (${megabytes(this.bytes)} sent) in ${seconds.toFixed(1)} s, ${number(sent / Math.max(seconds, 0.001))} rows/s${before}\n`,
    );
  }

  /** After Ctrl-C: how far the load got, and how to finish it. */
  interrupted(): void {
    const of = this.total === undefined ? '' : ` of ${number(this.total)}`;
    if (this.tty) process.stderr.write('\n');
    process.stderr.write(
      `interrupted: ${number(this.rows)}${of} rows are in the table. Run the same command again to resume: ` +
        'it skips what landed and sends the rest, every row exactly once.\n',
    );
  }
}
