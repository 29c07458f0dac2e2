import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rememberSecret } from './logs.js';
import { freshControlUrl } from './postgres.js';
import { cli, type Served, serveProcess } from './processes.js';
import { type Client, client } from './server.js';

/** Several `strata serve` processes on one fresh PostgreSQL database and one data folder. */
export interface Nodes {
  controlUrl: string;
  dataDir: string;
  nodes: Served[];
  /** A client of account `acme` on each node. */
  apis: Client[];
  /** Kills the nodes, waits for them to end, and deletes the data folder. */
  stop(): Promise<void>;
}

/** Starts `count` nodes with `env` over the control store's URL, and makes a key of account `acme` for them. */
export async function startNodes(count: number, env: Record<string, string> = {}): Promise<Nodes> {
  const controlUrl = await freshControlUrl();
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-nodes-'));
  const created = await cli(['keys', 'create', '--account', 'acme'], { STRATA_CONTROL_URL: controlUrl });
  const secret = created.stdout.trim();
  rememberSecret(secret);
  const nodes = await Promise.all(
    Array.from({ length: count }, () => serveProcess(dataDir, { ...env, STRATA_CONTROL_URL: controlUrl })),
  );
  return {
    controlUrl,
    dataDir,
    nodes,
    apis: nodes.map((node) => client(node.url, `Bearer ${secret}`)),
    async stop() {
      for (const node of nodes) node.child.kill('SIGKILL');
      await Promise.all(nodes.map((node) => node.exited));
      // A killed node's upkeep process ends once it notices its parent gone, and may finish writing an index
      // file meanwhile: on a loaded machine that has taken longer than 3 s, so the folder is retried for 20 s.
      await rm(dataDir, { recursive: true, force: true, maxRetries: 100, retryDelay: 200 });
    },
  };
}
