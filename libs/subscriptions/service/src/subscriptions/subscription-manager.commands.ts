import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, EVENT_STORE, handleCommand } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import {
  pausedBy,
  type PauserRole,
  type SubscriptionManagerCommand,
  subscriptionManagerDecider,
  type SubscriptionManagerEvent,
  subscriptionManagerStreamId,
} from '@stablepay/subscriptions-domain';
import type { Clock } from '@stablepay/util';
import type { SubscriptionOwner } from './subscription.commands';

/**
 * The command side of the SubscriptionManager aggregate (`subscriptionManager-<caip2>:<address>`): the manager's
 * pause and unpause logs as the indexer observed them. Appended only by the subscriptions service.
 */
@Injectable()
export class SubscriptionManagerCommands {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  now(): Date {
    return this.clock.now();
  }

  async run(
    chain: string,
    address: string,
    owner: SubscriptionOwner,
    command: SubscriptionManagerCommand,
    idempotencyKey: string,
  ): Promise<void> {
    await handleCommand(
      this.store,
      subscriptionManagerStreamId(chain, address),
      subscriptionManagerDecider,
      command,
      {
        idempotencyKey,
        metadata: {
          merchantId: owner.merchantId,
          mode: owner.mode,
          occurredAt: this.clock.now().toISOString(),
        },
      },
    );
  }

  /** The pausers whose flag is on at the manager, from its stream (the write side: no read model lag). */
  async pausedBy(chain: string, address: string): Promise<PauserRole[]> {
    const events = await this.store.readStream(subscriptionManagerStreamId(chain, address));
    return pausedBy(
      events.reduce(
        (state, e) => subscriptionManagerDecider.evolve(state, e as unknown as SubscriptionManagerEvent),
        subscriptionManagerDecider.initialState(),
      ),
    );
  }
}
