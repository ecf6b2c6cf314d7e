import {
  decideSubscription,
  evolveSubscription,
  initialSubscriptionState,
  type SubscriptionCommand,
} from './subscription';
import type { ChargeObservation, SubscriptionCreatedData, SubscriptionEvent } from './subscription.events';

/** Shared given-state of the subscription unit tests (not exported by the library). */
export const SUB_ID = `0x${'5a'.repeat(32)}`;
export const CHAIN = 'eip155:8453';
export const START = 1_780_000_000n; // chain time of the subscribe block, unix seconds
export const PERIOD = 30 * 24 * 3600;
export const iso = (unix: bigint) => new Date(Number(unix) * 1000).toISOString();
export const tx = (n: number) => `0x${n.toString(16).padStart(64, '0')}`;

export const createdData: SubscriptionCreatedData = {
  subscriptionId: SUB_ID,
  checkoutId: 'schk_01',
  subscriber: '0x1111111111111111111111111111111111111111',
  externalCustomerId: 'cus_42',
  chain: CHAIN,
  asset: `${CHAIN}/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913`,
  tokenSymbol: 'USDC',
  tokenDecimals: 6,
  cap: '10000000',
  budget: '25000000',
  price: '150000',
  priceCurrency: 'ARS',
  periodDuration: PERIOD,
  startedAt: START.toString(),
  txHash: tx(1),
  createdAt: iso(START),
};

/** A SubscriptionCharged log `offset` seconds after the start, with the contract's window bookkeeping. */
export function chargeLog(
  nonce: number,
  amount: bigint,
  offset: bigint,
  windowSpent: bigint,
  txN = 100 + nonce,
): ChargeObservation {
  return {
    nonce,
    amount: amount.toString(),
    fee: '1200',
    txHash: tx(txN),
    blockNumber: String(1000 + nonce),
    chargedAt: iso(START + offset),
    windowIndex: ((offset / BigInt(PERIOD)) as bigint).toString(),
    windowSpent: windowSpent.toString(),
    quoteHash: `0x${'0'.repeat(64)}`,
  };
}

export const subscribed: Extract<SubscriptionCommand, { type: 'RecordSubscriptionCreated' }> = {
  type: 'RecordSubscriptionCreated',
  subscription: createdData,
  firstCharge: chargeLog(0, 5_000_000n, 0n, 5_000_000n, 1),
  writtenBy: 'api',
};

export const stateOf = (events: readonly SubscriptionEvent[]) =>
  events.reduce(evolveSubscription, initialSubscriptionState());

export function subscribedEvents(): SubscriptionEvent[] {
  return decideSubscription(subscribed, initialSubscriptionState());
}

/** SPEC Resources > Subscription: every field of the object. */
export const SUBSCRIPTION_FIELDS: readonly string[] = [
  'object',
  'id',
  'subscription_id',
  'subscriber',
  'external_customer_id',
  'asset',
  'token_symbol',
  'token_decimals',
  'chain',
  'cap_amount',
  'price',
  'price_currency',
  'period_duration',
  'last_charged_at',
  'next_charge_at',
  'charge_nonce',
  'status',
  'paused',
  'flagged',
  'budget',
  'spent_this_period',
  'remaining_budget',
  'created_at',
];
