import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, deterministicEventId, EVENT_STORE, handleCommand } from '@stablepay/aggregate';
import {
  DuplicateEventIdError,
  type EventStore,
  type Mode,
  WrongExpectedRevisionError,
} from '@stablepay/event-store';
import {
  type SubscriptionCommand,
  subscriptionDecider,
  type SubscriptionEvent,
  type SubscriptionState,
  subscriptionStreamId,
} from '@stablepay/subscriptions-domain';
import type { Clock } from '@stablepay/util';
import { loadOwnedSubscription, type OwnedSubscription } from '../charges/owned-subscription';

export interface SubscriptionOwner {
  readonly merchantId: string;
  readonly mode: Mode;
}

/**
 * The command side of the Subscription aggregate (`subscription-<0x id>`): load, decide, append. Only the
 * subscriptions service appends here: the chain observation consumer, the subscribe call's receipt and the merchant
 * cancel. Every command is idempotent in the aggregate (by nonce, by transaction, by status), and an idempotency key
 * (the observation's id, the request's) makes a redelivered one append nothing even when the state moved on.
 */
@Injectable()
export class SubscriptionCommands {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  now(): Date {
    return this.clock.now();
  }

  /** The owner's subscription folded from its stream (another merchant's, or unknown, is 404). */
  owned(owner: SubscriptionOwner, subscriptionId: string): Promise<OwnedSubscription> {
    return loadOwnedSubscription(this.store, owner, subscriptionId);
  }

  /**
   * The stream's revision when a command under `idempotencyKey` was already applied to it (its first event is
   * there under the id the key derives), else undefined: a retry after a lost answer is answered, not judged again.
   */
  async appliedRevision(subscriptionId: string, idempotencyKey: string): Promise<number | undefined> {
    const streamId = subscriptionStreamId(subscriptionId.toLowerCase());
    const first = deterministicEventId(streamId, idempotencyKey, 0);
    const events = await this.store.readStream(streamId);
    return events.some((e) => e.id === first) ? events[events.length - 1]?.revision : undefined;
  }

  async run(
    subscriptionId: string,
    owner: SubscriptionOwner,
    command: SubscriptionCommand,
    idempotencyKey?: string,
  ): Promise<{ revision: number; newEvents: SubscriptionEvent[] }> {
    const result = await handleCommand(
      this.store,
      subscriptionStreamId(subscriptionId.toLowerCase()),
      subscriptionDecider,
      command,
      {
        ...(idempotencyKey ? { idempotencyKey } : {}),
        metadata: {
          merchantId: owner.merchantId,
          mode: owner.mode,
          occurredAt: this.clock.now().toISOString(),
        },
      },
    );
    return { revision: result.revision, newEvents: result.newEvents };
  }

  /**
   * `run` for a caller that loaded the stream moments ago (the charge records its receipt against the stream its
   * preflight read): decided on that state and appended at its revision, without reading the stream again. When
   * the stream moved on since (the indexer recorded the charge first), the key already appended, or that state
   * refuses the command, it is `run` as usual, which decides on the stream as it is now: same outcome as `run`.
   */
  async runFrom(
    loaded: { readonly state: SubscriptionState; readonly revision: number },
    subscriptionId: string,
    owner: SubscriptionOwner,
    command: SubscriptionCommand,
    idempotencyKey: string,
  ): Promise<{ revision: number; newEvents: SubscriptionEvent[] }> {
    const streamId = subscriptionStreamId(subscriptionId.toLowerCase());
    let newEvents: SubscriptionEvent[];
    try {
      newEvents = subscriptionDecider.decide(command, loaded.state);
    } catch {
      return this.run(subscriptionId, owner, command, idempotencyKey);
    }
    if (newEvents.length === 0 || loaded.revision < 0)
      return this.run(subscriptionId, owner, command, idempotencyKey);
    const occurredAt = this.clock.now().toISOString();
    try {
      const result = await this.store.appendToStream(
        streamId,
        newEvents.map((e, i) => ({
          id: deterministicEventId(streamId, idempotencyKey, i),
          type: e.type,
          data: e.data,
          metadata: { merchantId: owner.merchantId, mode: owner.mode, occurredAt },
        })),
        { expectedRevision: loaded.revision },
      );
      if (!result.retried) return { revision: result.nextExpectedRevision, newEvents };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError) && !(error instanceof DuplicateEventIdError))
        throw error;
    }
    return this.run(subscriptionId, owner, command, idempotencyKey);
  }
}
