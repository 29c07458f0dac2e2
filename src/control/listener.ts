import pg from 'pg';
import { CONTROL_CHANNEL } from './dialect/postgres.js';
import type { ControlEvent } from './events.js';

/** Waits of the listener's connection. */
const CONNECT_TIMEOUT_MS = 2000;
/** How often the listener proves its connection alive. */
const HEARTBEAT_MS = 2000;
/** How soon the listener connects again after its connection broke. */
const RELISTEN_MS = 500;

export interface NoticeHandlers {
  /** A notice another node (or this one) sent. */
  heard(event: ControlEvent): void;
  /** Listening from now on; notices sent while not listening were lost. */
  connected(): void;
  /** Not listening any more, until `connected` again. */
  disconnected(): void;
}

/**
 * Listens for the nodes' notices (LISTEN/NOTIFY) on a connection of its own, connecting again whenever it breaks.
 * Returns what stops it.
 */
export function listenForNotices(url: string, handlers: NoticeHandlers): { close(): Promise<void> } {
  let closed = false;
  let current: pg.Client | undefined;

  const listen = (): void => {
    if (closed) return;
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: CONNECT_TIMEOUT_MS,
      keepAlive: true,
    });
    current = client;
    let again = false;
    // A connection that went silent (no reset ever arrives) would leave remembered keys unrevoked: a heartbeat
    // that gets no answer counts as a break.
    const heartbeat = setInterval(() => void client.query('SELECT 1').catch(() => reconnect()), HEARTBEAT_MS);
    heartbeat.unref();
    const reconnect = () => {
      handlers.disconnected();
      clearInterval(heartbeat);
      if (again) return;
      again = true;
      client.end().catch(() => undefined);
      if (!closed) setTimeout(listen, RELISTEN_MS).unref();
    };
    client.on('error', reconnect);
    client.on('end', reconnect);
    client.on('notification', (message) => {
      if (message.channel !== CONTROL_CHANNEL || message.payload === undefined) return;
      let event: ControlEvent;
      try {
        event = JSON.parse(message.payload) as ControlEvent;
      } catch {
        return; // A notice this build cannot read is ignored.
      }
      handlers.heard(event);
    });
    client
      .connect()
      .then(() => client.query(`LISTEN ${CONTROL_CHANNEL}`))
      .then(() => {
        if (!again) handlers.connected();
      })
      .catch(reconnect);
  };

  listen();
  return {
    async close() {
      closed = true;
      await current?.end().catch(() => undefined);
    },
  };
}
