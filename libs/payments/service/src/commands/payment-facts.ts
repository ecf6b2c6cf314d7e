import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, EVENT_STORE, handleCommand, loadAggregate } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import {
  decidePayment,
  evolvePayment,
  initialPaymentState,
  paymentStreamId,
  type PaymentCommand,
  type PaymentEvent,
  type PaymentState,
} from '@stablepay/payments-domain';
import type { Clock } from '@stablepay/util';

// What tests and tools outside the scope read a payment with (an app may not import the domain lib itself).
export { paymentStreamId, toPaymentObject, type PaymentObject } from '@stablepay/payments-domain';

export const PAYMENT_DECIDER = {
  initialState: initialPaymentState,
  evolve: evolvePayment,
  decide: decidePayment,
};

/** A payment command without its time: the handler stamps it with the injected clock. */
export type TimelessPaymentCommand = PaymentCommand extends infer C
  ? C extends { now: Date }
    ? Omit<C, 'now'>
    : never
  : never;

/**
 * Appends the facts the chain produced to a payment's stream: load, decide (with the aggregate's own reactions),
 * append with a key derived from the chain event that caused it, so a redelivered observation appends nothing
 * twice. Metadata (merchant, mode) is the payment's own, from its first event.
 */
@Injectable()
export class PaymentFacts {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async load(paymentId: string): Promise<{ state: PaymentState; mode: 'test' | 'live' }> {
    const { state, events } = await loadAggregate(this.store, paymentStreamId(paymentId), PAYMENT_DECIDER);
    return { state, mode: events[0]?.metadata?.mode ?? 'test' };
  }

  async append(
    paymentId: string,
    command: TimelessPaymentCommand,
    idempotencyKey: string,
  ): Promise<{ state: PaymentState; newEvents: PaymentEvent[] }> {
    const { state, mode } = await this.load(paymentId);
    if (!state.created) return { state, newEvents: [] };
    const now = this.clock.now();
    const result = await handleCommand(
      this.store,
      paymentStreamId(paymentId),
      PAYMENT_DECIDER,
      { ...command, now } as PaymentCommand,
      {
        idempotencyKey,
        metadata: { merchantId: state.created.merchantId, mode, occurredAt: now.toISOString() },
      },
    );
    return { state: result.state, newEvents: result.newEvents };
  }
}
