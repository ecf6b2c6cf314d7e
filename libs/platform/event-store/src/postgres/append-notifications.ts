import type { Client } from 'pg';
import { ChannelListener } from '@stablepay/node-util';

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

/**
 * LISTENs on one dedicated connection for appends made by OTHER processes (or other store instances) and hands
 * them to `wake` (category and mark), so their subscriptions read at once instead of at the next poll. The polls
 * stay as the safety net (a notification lost while the connection was down): after every (re)connection `wake`
 * is called without a category, which wakes every subscription once.
 */
export class AppendNotifications {
  private readonly listener: ChannelListener;

  constructor(
    connect: () => Promise<Client>,
    private readonly instanceId: string,
    private readonly wake: (category: string | undefined, mark: bigint | undefined) => void,
    onError?: (error: unknown) => void,
  ) {
    this.listener = new ChannelListener(connect, APPEND_CHANNEL, {
      notified: (payload) => this.received(payload),
      // Whatever was appended while nobody listened: every subscription reads once.
      listening: () => this.wake(undefined, undefined),
      ...(onError ? { error: onError } : {}),
    });
  }

  /** Opens the listening connection; on failure keeps retrying in the background (the polls cover meanwhile). */
  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  private received(payload: string | undefined): void {
    const parsed = parseAppendNotification(payload);
    if (!parsed) {
      this.wake(undefined, undefined);
      return;
    }
    if (parsed.instanceId === this.instanceId) return;
    this.wake(parsed.category, parsed.mark);
  }
}
