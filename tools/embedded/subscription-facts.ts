import { createHash, randomUUID } from 'node:crypto';
import type { EventStore } from '@stablepay/event-store';

/**
 * The facts of `subscriptions.subscription.v1` (the published contract the charge ledger and its webhooks read) as
 * the subscriptions service appends them from either write path, for end-to-end tests that drive the ledger without
 * a chain: `SubscriptionCreated.v1`, then charge facts.
 */
export const FACTS_CHAIN = 'eip155:8453';
export const FACTS_START = 1_780_000_000;
export const iso = (unix: number) => new Date(unix * 1000).toISOString();
export const tx = (n: number) => `0x${n.toString(16).padStart(64, '0')}`;

/** The subscriptions scope's derivation of a succeeded charge's id (SPEC Events rule 6), restated as the contract. */
export const chargeIdOf = (subscriptionId: string, nonce: number) =>
  `subc_${createHash('sha256').update(`${FACTS_CHAIN}|${subscriptionId.toLowerCase()}|${nonce}`).digest('hex').slice(0, 26)}`;

export interface FactSubscription {
  readonly subscriptionId: string;
  readonly subscriber: string;
  /** Sequence number of the subscription in the test: its transactions are tx(n * 1000 + nonce). */
  readonly n: number;
}

export function subscriptionFacts(
  store: () => EventStore,
  occurredAt: () => string = () => new Date().toISOString(),
) {
  let seq = 0;
  const append = async (owner: { id: string }, subscriptionId: string, type: string, data: object) => {
    const streamId = `subscription-${subscriptionId}`;
    await store().appendToStream(streamId, [
      {
        id: randomUUID(),
        type,
        data,
        metadata: { merchantId: owner.id, mode: 'test', occurredAt: occurredAt() },
      },
    ]);
    return (await store().readStream(streamId)).at(-1);
  };
  const subscription = async (
    owner: { id: string },
    plan: { price: string; priceCurrency: string | null } = { price: '150000', priceCurrency: 'ARS' },
  ): Promise<FactSubscription> => {
    seq += 1;
    const created = {
      subscriptionId: `0x${seq.toString(16).padStart(64, 'a')}`,
      checkoutId: null,
      subscriber: `0x${seq.toString(16).padStart(40, '1')}`,
      externalCustomerId: null,
      chain: FACTS_CHAIN,
      asset: `${FACTS_CHAIN}/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913`,
      tokenSymbol: 'USDC',
      tokenDecimals: 6,
      cap: '10000000',
      budget: '25000000',
      ...plan,
      periodDuration: 30 * 24 * 3600,
      startedAt: String(FACTS_START),
      txHash: tx(seq * 1000),
      createdAt: iso(FACTS_START),
    };
    await append(owner, created.subscriptionId, 'SubscriptionCreated.v1', created);
    return { subscriptionId: created.subscriptionId, subscriber: created.subscriber, n: seq };
  };
  /** SubscriptionChargeSucceeded.v1 of `nonce`, as either write path records it. */
  const charged = (
    owner: { id: string },
    s: FactSubscription,
    nonce: number,
    writtenBy: 'api' | 'indexer',
    chargedAt = iso(FACTS_START + 60 * nonce),
    /** Fields a newer writer adds (the charge call's `quotedFiatAmount`). */
    extra: object = {},
  ) =>
    append(owner, s.subscriptionId, 'SubscriptionChargeSucceeded.v1', {
      chargeId: chargeIdOf(s.subscriptionId, nonce),
      nonce,
      amount: '5000000',
      fee: '1200',
      txHash: tx(s.n * 1000 + nonce),
      blockNumber: String(1000 + nonce),
      chargedAt,
      windowIndex: '0',
      windowSpent: String(5_000_000 * (nonce + 1)),
      quoteHash: `0x${'0'.repeat(64)}`,
      writtenBy,
      landedByAnotherSubmitter: false,
      ...extra,
    });
  return { append, subscription, charged };
}
