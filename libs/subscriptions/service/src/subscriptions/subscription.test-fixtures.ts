import type { EventStore, RecordedEvent } from '@stablepay/event-store';
import {
  type ChargeObservation,
  decideSubscription,
  evolveSubscription,
  initialSubscriptionState,
  type SubscriptionCommand,
  type SubscriptionEvent,
} from '@stablepay/subscriptions-domain';

/** Shared given-state of the subscription service tests (not exported by the library): a subscription on a local chain. */
export const CHAIN = 'eip155:31337';
export const tx = (n: number) => `0x${n.toString(16).padStart(64, '0')}`;

/** A SubscriptionCharged log of `nonce` in transaction `tx(txN)`, 1 USDC each. */
export const chargeLog = (
  nonce: number,
  txN: number,
  receipt?: ChargeObservation['receipt'],
): ChargeObservation => ({
  nonce,
  amount: '1000000',
  fee: '0',
  txHash: tx(txN),
  blockNumber: '42',
  chargedAt: '2026-05-28T21:00:00.000Z',
  windowIndex: '0',
  windowSpent: String(1_000_000 * nonce),
  quoteHash: `0x${'0'.repeat(64)}`,
  ...(receipt ? { receipt } : {}),
});

/**
 * The stream of `subscriptionId`: created (by the indexer, no first charge), then `commands` decided in turn, appended
 * with the owner's metadata; the events as stored.
 */
export async function subscriptionStream(
  store: EventStore,
  subscriptionId: string,
  commands: readonly SubscriptionCommand[],
): Promise<RecordedEvent[]> {
  let state = initialSubscriptionState();
  const events: SubscriptionEvent[] = [];
  const created: SubscriptionCommand = {
    type: 'RecordSubscriptionCreated',
    subscription: {
      subscriptionId,
      checkoutId: null,
      subscriber: '0x2222222222222222222222222222222222222222',
      externalCustomerId: null,
      chain: CHAIN,
      asset: `${CHAIN}/erc20:0x3333333333333333333333333333333333333333`,
      tokenSymbol: 'USDC',
      tokenDecimals: 6,
      cap: '10000000',
      budget: '25000000',
      price: '1000000',
      priceCurrency: null,
      periodDuration: 2_592_000,
      startedAt: '1780000000',
      txHash: tx(1),
      createdAt: '2026-05-28T20:26:40.000Z',
    },
    firstCharge: null,
    writtenBy: 'indexer',
  };
  for (const command of [created, ...commands]) {
    const decided = decideSubscription(command, state);
    state = decided.reduce(evolveSubscription, state);
    events.push(...decided);
  }
  const streamId = `subscription-${subscriptionId}`;
  await store.appendToStream(
    streamId,
    events.map((e, i) => ({
      id: `${streamId}:${i}`,
      type: e.type,
      data: e.data,
      metadata: { merchantId: 'mer_1', mode: 'test' as const },
    })),
  );
  return store.readStream(streamId);
}
