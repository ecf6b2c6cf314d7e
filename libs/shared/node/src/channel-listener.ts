import { Client, type ClientConfig, type Notification } from 'pg';

/** Reconnection back-off of a listening connection: 100 ms doubling to 5 s. */
const RECONNECT_INITIAL_MS = 100;
const RECONNECT_MAX_MS = 5_000;

/**
 * A connection for a ChannelListener. It alone does not keep the process alive (a test that never closes its
 * listener, a service whose shutdown forgot one): a pool's idle connections time out, this one never would.
 */
export async function connectForListening(config: ClientConfig): Promise<Client> {
  const client = new Client(config);
  await client.connect();
  (client as unknown as { connection?: { stream?: { unref?: () => void } } }).connection?.stream?.unref?.();
  return client;
}

export interface ChannelListenerHandlers {
  /** A notification on the channel (payload as sent). */
  notified(payload: string | undefined): void;
  /**
   * The connection is listening, at the start and after every reconnection: whatever was notified while nobody
   * listened is lost, so the caller looks at the state once (its polls cover the gap meanwhile).
   */
  listening(): void;
  /** A connection that failed or was lost (retried in the background). */
  error?(error: unknown): void;
}

/**
 * LISTENs on one PostgreSQL channel over one dedicated connection, reconnecting with back-off when it is lost. A
 * notification is only a wake-up: callers keep a (rarer) poll as the safety net for what was sent while the
 * connection was down.
 */
export class ChannelListener {
  private client: Client | undefined;
  private stopped = false;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly connect: () => Promise<Client>,
    private readonly channel: string,
    private readonly handlers: ChannelListenerHandlers,
  ) {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a plain channel name: ${channel}`);
  }

  /** True while the connection listens. */
  get listening(): boolean {
    return this.client !== undefined;
  }

  /** Opens the listening connection; on failure keeps retrying in the background. */
  async start(): Promise<void> {
    await this.open();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async open(): Promise<void> {
    if (this.stopped) return;
    let client: Client | undefined;
    try {
      client = await this.connect();
      const opened = client;
      opened.on('notification', (n: Notification) => {
        if (n.channel === this.channel) this.handlers.notified(n.payload);
      });
      opened.on('error', (error) => this.lost(opened, error));
      opened.on('end', () => this.lost(opened, undefined));
      await opened.query(`LISTEN ${this.channel}`);
      if (this.stopped) {
        await opened.end().catch(() => undefined);
        return;
      }
      this.client = opened;
      this.failures = 0;
      this.handlers.listening();
    } catch (error) {
      this.handlers.error?.(error);
      await client?.end().catch(() => undefined);
      this.retryLater();
    }
  }

  private lost(client: Client, error: unknown): void {
    if (this.client !== client) return;
    this.client = undefined;
    if (error !== undefined) this.handlers.error?.(error);
    client.end().catch(() => undefined);
    this.retryLater();
  }

  private retryLater(): void {
    if (this.stopped) return;
    const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_INITIAL_MS * 2 ** Math.min(this.failures++, 30));
    this.timer = setTimeout(() => void this.open(), delay);
    this.timer.unref();
  }
}
