import {
  decideSubscriptionCheckout,
  foldSubscriptionCheckout,
  type SubscriptionChargeSucceededData,
  type SubscriptionCheckoutCommand,
  type SubscriptionCheckoutEvent,
  type SubscriptionCreatedData,
} from '@stablepay/subscriptions-domain';
import { createdCheckoutEvents } from './checkout.test-fixtures';
import { type LedgerChargeRowView, subscriptionCheckoutWebhookSource } from './webhook-object';

/** docs/subscription-checkouts.md, Events: data.first_charge of subscription_checkout.completed is the ledger's row. */
const now = new Date('2026-06-01T10:00:00.000Z');
const ID = 'schk_01jxyzexample0000000000000';
const SUB = `0x${'ab'.repeat(32)}`;
const TX = `0x${'77'.repeat(32)}`;

const subscription: SubscriptionCreatedData = {
  subscriptionId: SUB,
  checkoutId: ID,
  subscriber: '0x1111111111111111111111111111111111111111',
  externalCustomerId: null,
  chain: 'eip155:8453',
  asset: 'eip155:8453/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913',
  tokenSymbol: 'USDC',
  tokenDecimals: 6,
  cap: '2000000',
  budget: '20000000',
  price: '100',
  priceCurrency: 'ARS',
  periodDuration: 3600,
  startedAt: '1780000000',
  txHash: TX,
  createdAt: '2026-06-01T09:59:58.000Z',
};
const firstCharge: SubscriptionChargeSucceededData = {
  chargeId: 'subc_first',
  nonce: 0,
  amount: '84',
  fee: '0',
  txHash: TX,
  blockNumber: '1234',
  chargedAt: '2026-06-01T09:59:58.000Z',
  windowIndex: '0',
  windowSpent: '84',
  quoteHash: `0x${'0'.repeat(64)}`,
  writtenBy: 'api',
  landedByAnotherSubmitter: false,
};

function stream(...commands: SubscriptionCheckoutCommand[]): SubscriptionCheckoutEvent[] {
  const events = createdCheckoutEvents(ID, SUB, { price: '100', price_currency: 'ARS' }, now);
  for (const command of commands)
    events.push(...decideSubscriptionCheckout(command, foldSubscriptionCheckout(events)));
  return events;
}
const complete: SubscriptionCheckoutCommand = {
  type: 'CompleteSubscriptionCheckout',
  subscriber: subscription.subscriber,
  chain: subscription.chain,
  asset: subscription.asset,
  txHash: TX,
  subscription,
  firstCharge,
  now,
};
const retract: SubscriptionCheckoutCommand = {
  type: 'RetractSubscriptionCheckoutCompletion',
  txHash: TX,
  now,
};

/** The ledger as the source sees it: the first charge's stream, its n-th recording, the list. */
const ledgerRow = (n: number) => ({
  object: 'subscription_charge',
  id: 'subc_first',
  tx_hash: TX,
  created_at: `2026-06-01T10:00:0${n}.000Z`,
  fiat_amount: '100',
  fiat_currency: 'ARS',
  settlement_status: null,
});
const listedRows: string[] = [];
const ledger: LedgerChargeRowView = {
  streamIdOf: (id) => `charge-${id}`,
  rowAsOfRecording: (history, n) =>
    history.filter((e) => e.type === 'ChargeRecorded.v1').length >= n ? ledgerRow(n) : null,
  listed: async (_reads, row) => listedRows.includes(row.id),
};
const recording = { type: 'ChargeRecorded.v1', data: {} };
const source = subscriptionCheckoutWebhookSource(ledger);
const reads = { query: async () => [] };

describe('subscriptionCheckoutWebhookSource: data.first_charge is the charge ledger row', () => {
  it('given a completion the ledger has not recorded yet, then it waits for the charge stream (relatedReady false)', () => {
    const events = stream(complete);
    const completed = events.at(-1);
    if (!completed) throw new Error('no completion');
    expect(source.relatedStreams(completed, events)).toEqual(['charge-subc_first']);
    expect(source.relatedReady(completed, events, new Map())).toBe(false);
    expect(source.relatedReady(completed, events, new Map([['charge-subc_first', []]]))).toBe(false);
  });

  it('given the recorder gave up waiting for the ledger, then data.first_charge is the charge as the completion recorded it', () => {
    const events = stream(complete);
    const completed = events.at(-1);
    if (!completed) throw new Error('no completion');
    const hook = source.map(completed, events, new Map());
    expect(hook?.type).toBe('subscription_checkout.completed');
    expect(hook?.data['first_charge']).toMatchObject({ id: 'subc_first', status: 'succeeded' });
    expect(hook?.data['first_charge']).not.toHaveProperty('created_at');
  });

  it('given the ledger recorded the first charge, then data.first_charge is its row (created_at and the fiat fields) and the subscription comes from the facts', () => {
    const events = stream(complete);
    const completed = events.at(-1);
    if (!completed) throw new Error('no completion');
    const related = new Map([['charge-subc_first', [recording]]]);
    expect(source.relatedReady(completed, events, related)).toBe(true);
    const hook = source.map(completed, events, related);
    expect(hook?.type).toBe('subscription_checkout.completed');
    expect(hook?.data['first_charge']).toEqual(ledgerRow(1));
    expect(hook?.data['subscription']).toMatchObject({ id: SUB, charge_nonce: 1, status: 'active' });
  });

  it('given a completion undone by a reorg and completed again, then the second completion shows the second recording', () => {
    const events = stream(complete, retract, complete);
    const second = events.at(-1);
    if (!second) throw new Error('no completion');
    expect(source.relatedReady(second, events, new Map([['charge-subc_first', [recording]]]))).toBe(false);
    const related = new Map([['charge-subc_first', [recording, recording]]]);
    expect(source.map(second, events, related)?.data['first_charge']).toEqual(ledgerRow(2));
    // The first completion, mapped again (a redelivery), keeps the row of its own recording.
    const first = events.slice(0, 2);
    expect(source.map(events[1] ?? recording, first, related)?.data['first_charge']).toEqual(ledgerRow(1));
  });

  it('other events read no ledger stream, and only a completion waits for the charges list', async () => {
    const events = stream();
    const created = events[0];
    if (!created) throw new Error('no creation');
    expect(source.relatedStreams(created, events)).toEqual([]);
    expect(source.relatedReady(created, events, new Map())).toBe(true);
    expect(await source.isReadable({ data: { object: {} } }, reads)).toBe(true);
    const completion = { data: { object: {}, first_charge: ledgerRow(1) } };
    expect(await source.isReadable(completion, reads)).toBe(false);
    listedRows.push('subc_first');
    expect(await source.isReadable(completion, reads)).toBe(true);
  });
});
