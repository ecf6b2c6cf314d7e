import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, EVENT_STORE, handleCommand } from '@stablepay/aggregate';
import { computeDepositAddress, toOnChainId } from '@stablepay/contracts';
import type { EventStore, Mode } from '@stablepay/event-store';
import {
  type CreateCheckoutContext,
  type CreateCheckoutInput,
  decidePayment,
  evolvePayment,
  initialPaymentState,
  type PaymentCommand,
  type PaymentEvent,
  type PaymentState,
  paymentStreamId,
} from '@stablepay/payments-domain';
import { canonicalJson, type Clock, derivedId, newId } from '@stablepay/util';
import type { PaymentOwner } from './payment.reader';

/** The Payment aggregate as a Decider for handleCommand. */
export const paymentDecider = {
  initialState: initialPaymentState,
  evolve: evolvePayment,
  decide: decidePayment,
};

/** What an append answers: the caller waits for its read model at `revision` (read-your-writes). */
export interface PaymentAppended {
  readonly paymentId: string;
  readonly revision: number;
  /** False when the command changed nothing (an idempotent no-op). */
  readonly changed: boolean;
  readonly state: PaymentState;
  readonly newEvents: readonly PaymentEvent[];
}

/** Every command but a creation: the payment's own command, minus the time (stamped here by the injected clock). */
export type PaymentCommandWithoutTime = PaymentCommand extends infer C
  ? C extends { type: 'CreateCheckout' }
    ? never
    : C extends { now: Date }
      ? Omit<C, 'now'>
      : never
  : never;

export interface CheckoutIds {
  readonly checkoutId: string;
  readonly paymentId: string;
  /** 32-byte id of the payment on chain (keccak256 of the payment id), bound into the deposit address. */
  readonly onChainId: string;
}

/**
 * The ids of a new checkout. With a command id they derive from it (scoped by merchant, mode and the canonical
 * parameters), so a retried create finds the checkout its first attempt appended instead of creating a second.
 */
export function checkoutIds(
  owner: { merchantId: string; mode: Mode },
  input: CreateCheckoutInput,
  commandId: string | undefined,
  now: Date,
): CheckoutIds {
  const seed = commandId
    ? [owner.merchantId, owner.mode, commandId, canonicalJson(input)].join('\u0000')
    : null;
  const checkoutId = seed ? derivedId('chk', seed) : newId('chk', now);
  const paymentId = seed ? derivedId('pay', `${seed}\u0000payment`) : newId('pay', now);
  return { checkoutId, paymentId, onChainId: toOnChainId(paymentId) };
}

/**
 * The deposit address: the CREATE2 address of the payment's PaymentDeposit clone, bound to the merchant's and the
 * payment's on-chain ids (keccak256 of each id), known before anything is deployed and the same on every chain.
 */
export function depositAddressOf(paymentFactory: string, merchantId: string, onChainId: string): string {
  return computeDepositAddress(paymentFactory, toOnChainId(merchantId), onChainId);
}

/**
 * The command side of the Payment aggregate: load, decide, append, in the payments service (the owner). Any use
 * case of the aggregate (the checkout routes here, the chain feed, the signed actions) appends through `run`, so
 * metadata, idempotency and the clock are the same for all.
 */
@Injectable()
export class PaymentCommands {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  now(): Date {
    return this.clock.now();
  }

  /**
   * Runs one command against a payment's stream. `idempotencyKey` derives the event ids, so the same command
   * delivered twice appends once (a key already in the stream is answered without deciding again).
   */
  async run(
    owner: PaymentOwner,
    command: PaymentCommandWithoutTime,
    idempotencyKey?: string,
  ): Promise<PaymentAppended> {
    const now = this.clock.now();
    return this.append(owner, { ...command, now } as PaymentCommand, now, idempotencyKey);
  }

  /**
   * Runs a command decided at `decisionTime` rather than the service clock: a rule the contract checks against block
   * time (the payer's challenge period) is decided at the chain's time. The event's metadata keeps the service time.
   */
  async runAt(
    owner: PaymentOwner,
    command: PaymentCommandWithoutTime,
    decisionTime: Date,
    idempotencyKey?: string,
  ): Promise<PaymentAppended> {
    return this.append(
      owner,
      { ...command, now: decisionTime } as PaymentCommand,
      this.clock.now(),
      idempotencyKey,
    );
  }

  async create(
    owner: { merchantId: string; mode: Mode },
    ids: CheckoutIds,
    details: {
      readonly input: CreateCheckoutInput;
      readonly depositAddress: string;
      readonly checkoutUrl: string;
      readonly context: CreateCheckoutContext;
      readonly now: Date;
    },
    commandId?: string,
  ): Promise<PaymentAppended> {
    return this.append(
      { id: ids.paymentId, merchant_id: owner.merchantId, mode: owner.mode },
      {
        type: 'CreateCheckout',
        paymentId: ids.paymentId,
        checkoutId: ids.checkoutId,
        merchantId: owner.merchantId,
        onChainId: ids.onChainId,
        depositAddress: details.depositAddress,
        checkoutUrl: details.checkoutUrl,
        input: details.input,
        context: details.context,
        now: details.now,
      },
      details.now,
      commandId,
    );
  }

  private async append(
    owner: PaymentOwner,
    command: PaymentCommand,
    now: Date,
    idempotencyKey?: string,
  ): Promise<PaymentAppended> {
    const result = await handleCommand(this.store, paymentStreamId(owner.id), paymentDecider, command, {
      ...(idempotencyKey ? { idempotencyKey } : {}),
      metadata: { merchantId: owner.merchant_id, mode: owner.mode, occurredAt: now.toISOString() },
    });
    return {
      paymentId: owner.id,
      revision: result.revision,
      changed: result.newEvents.length > 0,
      state: result.state,
      newEvents: result.newEvents,
    };
  }
}
