import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, EVENT_STORE, handleCommand } from '@stablepay/aggregate';
import type { EventStore, Mode } from '@stablepay/event-store';
import {
  type SubscriptionCommand,
  subscriptionDecider,
  type SubscriptionEvent,
  subscriptionStreamId,
} from '@stablepay/subscriptions-domain';
import type { Clock } from '@stablepay/util';

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
}
