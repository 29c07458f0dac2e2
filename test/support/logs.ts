import { Writable } from 'node:stream';

/** Every log line any app wrote in this test file, and every secret the tests issued. */
const lines: string[] = [];
const secrets = new Set<string>();

export const logSink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    lines.push(chunk.toString('utf8'));
    done();
  },
});

export function rememberSecret(secret: string): void {
  secrets.add(secret);
}

export function capturedLogs(): readonly string[] {
  return lines;
}

/** Secrets (or their 24-character heads) that appear in any captured line. */
export function leakedSecrets(): string[] {
  const text = lines.join('');
  return [...secrets].filter((secret) => text.includes(secret) || text.includes(secret.slice(0, 24)));
}
