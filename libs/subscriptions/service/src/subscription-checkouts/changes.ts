import { Injectable } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import type { SubscriptionCheckoutRow } from './subscription-checkout.reader';

/** How many rows the projection last committed are kept for waiters that arrive after the wake-up. */
const RECENT_ROWS = 4096;

/**
 * In-process wake-ups for read-your-writes: the projection emits `<id>` with the revision and the row it
 * committed, so a command that waits for its revision gets the row without reading it. Where the projection
 * runs in another process nothing is emitted here and the reader polls instead.
 */
@Injectable()
export class SubscriptionCheckoutChanges extends EventEmitter {
  /** True while this process runs the subscription checkout projection (set by the projection). */
  projecting = false;
  private readonly recent = new Map<string, SubscriptionCheckoutRow>();

  constructor() {
    super();
    this.setMaxListeners(0);
  }

  /**
   * The projection committed `row`: remembered (a command whose answer arrives after the commit finds it here
   * instead of waiting for a wake-up it missed) and announced to waiters.
   */
  committed(row: SubscriptionCheckoutRow): void {
    this.recent.delete(row.id);
    this.recent.set(row.id, row);
    if (this.recent.size > RECENT_ROWS) {
      const oldest = this.recent.keys().next().value;
      if (oldest !== undefined) this.recent.delete(oldest);
    }
    this.emit(row.id, row.revision, row);
  }

  /** The row this process's projection committed last for `id`, if still remembered. */
  latest(id: string): SubscriptionCheckoutRow | undefined {
    return this.recent.get(id);
  }
}
