import type { Client, Notification } from 'pg';
import { backoffDelay, type BackoffSettings } from '../interruptible-sleep';

/** The channel every append notifies on (`pg_notify` inside the append statement, delivered at its commit). */
export const APPEND_CHANNEL = 'stablepay_events';

/**
 * The payload of an append's notification: who appended (so an instance ignores its own appends, which wake its
 * subscriptions directly), the stream's category (only that category's subscriptions are woken) and, appended by
 * the statement itself, the writing transaction's id (the mark a reader's horizon must pass).
 */
export function appendNotificationPrefix(instanceId: string, category: string): string {
  return `${instanceId} ${category}`;
}

/** Parses a payload; undefined when it is not one of ours. */
export function parseAppendNotification(
  payload: string | undefined,
): { instanceId: string; category: string; mark: bigint } | undefined {
  if (!payload) return undefined;
  const first = payload.indexOf(' ');
  const last = payload.lastIndexOf(' ');
  if (first <= 0 || last <= first) return undefined;
  const tx = payload.slice(last + 1);
  if (!/^\d+$/.test(tx)) return undefined;
  return { instanceId: payload.slice(0, first), category: payload.slice(first + 1, last), mark: BigInt(tx) };
}

const RECONNECT: BackoffSettings = { initialMs: 100, maxMs: 5_000 };

/**
 * LISTENs on one dedicated connection for appends made by OTHER processes (or other store instances) and hands
 * them to `wake` (category and mark), so their subscriptions read at once instead of at the next poll. The polls
 * stay as the safety net (a notification lost while the connection was down): after every (re)connection `wake`
 * is called without a category, which wakes every subscription once.
 */
export class AppendNotifications {
  private client: Client | undefined;
  private stopped = false;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly connect: () => Promise<Client>,
    private readonly instanceId: string,
    private readonly wake: (category: string | undefined, mark: bigint | undefined) => void,
    private readonly onError?: (error: unknown) => void,
  ) {}

  /** Opens the listening connection; on failure keeps retrying in the background (the polls cover meanwhile). */
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
      opened.on('notification', (n: Notification) => this.received(n));
      opened.on('error', (error) => this.lost(opened, error));
      opened.on('end', () => this.lost(opened, undefined));
      await opened.query(`LISTEN ${APPEND_CHANNEL}`);
      if (this.stopped) {
        await opened.end().catch(() => undefined);
        return;
      }
      this.client = opened;
      this.failures = 0;
      // Whatever was appended while nobody listened: every subscription reads once.
      this.wake(undefined, undefined);
    } catch (error) {
      this.onError?.(error);
      await client?.end().catch(() => undefined);
      this.retryLater();
    }
  }

  private received(notification: Notification): void {
    if (notification.channel !== APPEND_CHANNEL) return;
    const parsed = parseAppendNotification(notification.payload);
    if (!parsed) {
      this.wake(undefined, undefined);
      return;
    }
    if (parsed.instanceId === this.instanceId) return;
    this.wake(parsed.category, parsed.mark);
  }

  private lost(client: Client, error: unknown): void {
    if (this.client !== client) return;
    this.client = undefined;
    if (error !== undefined) this.onError?.(error);
    client.end().catch(() => undefined);
    this.retryLater();
  }

  private retryLater(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.open(), backoffDelay(RECONNECT, this.failures++));
    this.timer.unref();
  }
}
