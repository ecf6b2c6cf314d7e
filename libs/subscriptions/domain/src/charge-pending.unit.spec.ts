import { chargePreflight, type ChargeRequest } from './charge-preflight';
import { decideSubscription, type SubscriptionCommand, subscriptionObject } from './subscription';
import type { SubscriptionEvent } from './subscription.events';
import { chargeLog, START, stateOf, SUB_ID, subscribedEvents, tx } from './subscription.test-fixtures';

/** docs/subscriptions.md, Charge receipt timeout: a broadcast charge whose receipt did not arrive in time. */
const now = new Date('2026-06-01T10:00:00.000Z');
const QUOTE_HASH = `0x${'9f'.repeat(32)}`;
const chainNow = START + 3600n;
const PENDING_TX = tx(500);

function run(events: SubscriptionEvent[], command: SubscriptionCommand): SubscriptionEvent[] {
  const next = decideSubscription(command, stateOf(events));
  events.push(...next);
  return next;
}
const submit: SubscriptionCommand = {
  type: 'RecordChargeSubmitted',
  nonce: 1,
  amount: '2000000',
  quoteHash: QUOTE_HASH,
  txHash: PENDING_TX,
  now,
};
const submitted = (): SubscriptionEvent[] => {
  const events = subscribedEvents();
  run(events, submit);
  return events;
};
const request = (over: Partial<ChargeRequest> = {}): ChargeRequest => ({
  subscriptionId: SUB_ID,
  amount: 2_000_000n,
  nonce: 1,
  deadline: chainNow + 600n,
  quoteHash: QUOTE_HASH,
  quoteCode: 'refq_01abc',
  ...over,
});
const preflight = (events: SubscriptionEvent[], over: Partial<ChargeRequest> = {}) =>
  chargePreflight({
    state: stateOf(events),
    request: request(over),
    // Expired and used: a resumed charge is not checked against its quote again.
    quote: null,
    signatureValid: false,
    chainNow,
    now,
    settlement: { mode: 'crypto' },
  });

describe('Subscription: a charge awaiting its receipt', () => {
  it('records the pending transaction on its nonce; the object is unchanged (nothing charged yet)', () => {
    const events = submitted();
    expect(events.at(-1)?.type).toBe('SubscriptionChargeSubmitted.v1');
    expect(subscriptionObject(stateOf(events), START + 10n)).toMatchObject({ charge_nonce: 1 });
  });

  it('the same charge again resumes waiting for that transaction: nothing is sent twice', () => {
    expect(preflight(submitted())).toEqual({ outcome: 'pending', txHash: PENDING_TX });
  });

  it('other terms on the pending nonce are refused charge_pending (409)', () => {
    expect(preflight(submitted(), { amount: 1_999_999n })).toMatchObject({
      outcome: 'rejected',
      code: 'charge_pending',
      status: 409,
      param: 'nonce',
    });
  });

  it('the indexer recording the charge of that nonce settles it: answered as already charged', () => {
    const events = submitted();
    run(events, {
      type: 'RecordChargeSucceeded',
      charge: { ...chargeLog(1, 2_000_000n, 3600n, 7_000_000n), txHash: PENDING_TX, quoteHash: QUOTE_HASH },
      writtenBy: 'indexer',
    });
    expect(stateOf(events).pendingCharges.size).toBe(0);
    expect(preflight(events)).toMatchObject({ outcome: 'already_charged', txHash: PENDING_TX });
  });

  it('its receipt reverting settles it as a failed charge; the nonce is free for a new charge', () => {
    const events = submitted();
    run(events, {
      type: 'RecordChargeReverted',
      chargeId: 'subc_attempt',
      nonce: 1,
      amount: '2000000',
      txHash: PENDING_TX,
      failureReason: 'InsufficientBalance',
      stage: 'receipt',
      landed: null,
      now,
    });
    expect(stateOf(events).pendingCharges.size).toBe(0);
  });

  it('reporting the same submission twice records it once', () => {
    const events = submitted();
    expect(run(events, submit)).toEqual([]);
  });
});
