import {
  decideSubscription,
  type SubscriptionCommand,
  subscriptionObject,
  succeededChargeId,
} from './subscription';
import type { SubscriptionEvent } from './subscription.events';
import {
  CHAIN,
  chargeLog,
  createdData,
  START,
  stateOf,
  SUB_ID,
  SUBSCRIPTION_FIELDS,
  subscribedEvents,
  tx,
} from './subscription.test-fixtures';
import {
  chargeFailedWebhookData,
  chargeSucceededWebhookData,
  chargeWebhookDataAsOf,
  subscriptionEventWebhook,
  subscriptionStreamWebhook,
  type WebhookCharge,
} from './subscription.webhooks';

const now = new Date('2026-06-01T10:00:00.000Z');
const sorted = (keys: readonly string[]) => [...keys].sort();

/** The ledger's charge object (SPEC Subscription charge), as @stablepay/ledger-domain's chargeObject shapes it. */
const charge = (over: Partial<WebhookCharge> & Record<string, unknown> = {}): WebhookCharge => ({
  object: 'subscription_charge',
  id: succeededChargeId(CHAIN, SUB_ID, 1),
  subscription_id: SUB_ID,
  amount: '2000000',
  fee: '1200',
  tx_hash: tx(101),
  block_number: '1001',
  charged_at: new Date(Number(START + 60n) * 1000).toISOString(),
  charge_nonce: 1,
  status: 'succeeded',
  failure_reason: null,
  ...over,
});

function webhookAfter(command: SubscriptionCommand) {
  const before = subscribedEvents();
  const events = decideSubscription(command, stateOf(before));
  const last = events.at(-1) as SubscriptionEvent;
  return subscriptionEventWebhook(last, stateOf([...before, ...events]));
}

describe('Subscription webhooks (SPEC Events > Subscription events, rules 1-6)', () => {
  it('subscription.created: data.object is the subscription, carrying subscription_id also as id (rule 2)', () => {
    const events = subscribedEvents();
    const hook = subscriptionEventWebhook(events[0] as SubscriptionEvent, stateOf(events.slice(0, 1)));
    expect(hook?.type).toBe('subscription.created');
    const object = hook?.data['object'] as Record<string, unknown>;
    expect(sorted(Object.keys(object))).toEqual(sorted(SUBSCRIPTION_FIELDS));
    expect(object).toMatchObject({ id: SUB_ID, subscription_id: SUB_ID, object: 'subscription' });
  });

  it('subscription.charge_succeeded: data.object = subscription + deprecated spread; data.charge = the charge; the two charge_nonce differ by one (rule 4)', () => {
    const events = [
      ...subscribedEvents(),
      ...decideSubscription(
        {
          type: 'RecordChargeSucceeded',
          charge: chargeLog(1, 2_000_000n, 60n, 7_000_000n),
          writtenBy: 'api',
        },
        stateOf(subscribedEvents()),
      ),
    ];
    const subscription = subscriptionObject(stateOf(events), START + 60n);
    const data = chargeSucceededWebhookData(subscription, charge());
    expect(sorted(Object.keys(data.object))).toEqual(
      sorted([
        ...SUBSCRIPTION_FIELDS,
        'amount',
        'fee',
        'subscription_charge_id',
        'tx_hash',
        'block_number',
        'charged_at',
      ]),
    );
    expect(data.object).toMatchObject({
      subscription_charge_id: succeededChargeId(CHAIN, SUB_ID, 1),
      amount: '2000000',
      fee: '1200',
      tx_hash: tx(101),
    });
    expect(data.object.charge_nonce).toBe(2);
    expect(data.charge.charge_nonce).toBe(1);
    expect(data.charge.subscription_id).toBe(SUB_ID);
  });

  it('subscription.charge_failed: same shape plus failure_reason, no fee on data.object; the nonces are equal (rule 4)', () => {
    const subscription = subscriptionObject(stateOf(subscribedEvents()), START + 60n);
    const failed = charge({
      id: 'subc_attempt',
      status: 'failed',
      fee: '0',
      tx_hash: null,
      block_number: '0',
      failure_reason: 'InsufficientBalance',
    });
    const data = chargeFailedWebhookData(subscription, failed);
    expect(sorted(Object.keys(data.object))).toEqual(
      sorted([
        ...SUBSCRIPTION_FIELDS,
        'amount',
        'subscription_charge_id',
        'tx_hash',
        'block_number',
        'charged_at',
        'failure_reason',
      ]),
    );
    expect(data.object).not.toHaveProperty('fee');
    expect(data.charge.fee).toBe('0');
    expect(data.object.tx_hash).toBeNull();
    expect(data.object.charge_nonce).toBe(data.charge.charge_nonce);
  });

  it('a charge of another subscription or status is refused', () => {
    const subscription = subscriptionObject(stateOf(subscribedEvents()), START);
    expect(() =>
      chargeSucceededWebhookData(subscription, charge({ subscription_id: `0x${'00'.repeat(32)}` })),
    ).toThrow(RangeError);
    expect(() => chargeFailedWebhookData(subscription, charge())).toThrow(RangeError);
  });

  it('subscription.cap_updated and budget_updated: data.object is the subscription with the new value', () => {
    const cap = webhookAfter({
      type: 'RecordCapUpdated',
      oldCap: '10000000',
      newCap: '12000000',
      txHash: tx(600),
      updatedAt: now.toISOString(),
    });
    expect(cap?.type).toBe('subscription.cap_updated');
    expect(cap?.data['object']).toMatchObject({ cap_amount: '12000000', id: SUB_ID });
    const budget = webhookAfter({
      type: 'RecordBudgetUpdated',
      oldBudget: '25000000',
      newBudget: '30000000',
      windowIndex: '0',
      windowSpent: '5000000',
      txHash: tx(601),
      updatedAt: new Date(Number(START + 100n) * 1000).toISOString(),
    });
    expect(budget?.type).toBe('subscription.budget_updated');
    expect(budget?.data['object']).toMatchObject({ budget: '30000000', remaining_budget: '25000000' });
  });

  it('subscription.migrated: subscription plus old_subscriber, new_subscriber, new_subscriber_balance, new_subscriber_allowance', () => {
    const hook = webhookAfter({
      type: 'RecordMigrated',
      oldSubscriber: createdData.subscriber,
      newSubscriber: '0x2222222222222222222222222222222222222222',
      newSubscriberBalance: '90000000',
      newSubscriberAllowance: '1000000000',
      txHash: tx(700),
      migratedAt: now.toISOString(),
    });
    expect(hook?.type).toBe('subscription.migrated');
    const object = hook?.data['object'] as Record<string, unknown>;
    expect(sorted(Object.keys(object))).toEqual(
      sorted([
        ...SUBSCRIPTION_FIELDS,
        'old_subscriber',
        'new_subscriber',
        'new_subscriber_balance',
        'new_subscriber_allowance',
      ]),
    );
    expect(object).toMatchObject({
      subscriber: '0x2222222222222222222222222222222222222222',
      old_subscriber: createdData.subscriber,
      new_subscriber_balance: '90000000',
      new_subscriber_allowance: '1000000000',
    });
  });

  it('subscription.cancelled: subscription plus cancelled_by, status cancelled', () => {
    const hook = webhookAfter({
      type: 'RecordCancelled',
      by: 'subscriber',
      txHash: tx(401),
      cancelledAt: now.toISOString(),
    });
    expect(hook?.type).toBe('subscription.cancelled');
    expect(hook?.data['object']).toMatchObject({
      status: 'cancelled',
      cancelled_by: 'subscriber',
      id: SUB_ID,
    });
  });

  it('subscription.flagged: data.object has exactly id, subscription_id, object, subscriber', () => {
    const hook = webhookAfter({ type: 'FlagSubscription', now });
    expect(hook).toEqual({
      type: 'subscription.flagged',
      data: {
        object: {
          id: SUB_ID,
          subscription_id: SUB_ID,
          object: 'subscription',
          subscriber: createdData.subscriber,
        },
      },
    });
  });

  it('subscription.charge_paid_replaced_settlement_address: the subscription and the charge, where it paid and the settings address', () => {
    const paidTo = '0x00000000000000000000000000000000000000a1';
    const settlementAddress = '0x00000000000000000000000000000000000000b2';
    const hook = webhookAfter({
      type: 'RecordChargePaidReplacedSettlement',
      nonce: 0,
      txHash: tx(1),
      paidTo,
      settlementAddress,
      settlementChangedAt: new Date(Number(START - 60n) * 1000).toISOString(),
      now,
    });
    expect(hook?.type).toBe('subscription.charge_paid_replaced_settlement_address');
    expect(hook?.data).toEqual({
      object: expect.objectContaining({ id: SUB_ID, charge_nonce: 1 }),
      settlement_mismatch: {
        subscription_charge_id: succeededChargeId(CHAIN, SUB_ID, 0),
        charge_nonce: 0,
        tx_hash: tx(1),
        paid_to: paidTo,
        settlement_address: settlementAddress,
      },
    });
  });

  it('paused, unpaused and the cancel confirmation have no webhook', () => {
    expect(webhookAfter({ type: 'ConfirmCancel', by: 'merchant', txHash: tx(9), now })).toBeNull();
    expect(
      webhookAfter({
        type: 'RecordChargeReverted',
        chargeId: 'subc_x',
        nonce: 1,
        amount: '1',
        txHash: tx(8),
        failureReason: 'InsufficientBalance',
        stage: 'receipt',
        landed: null,
        now,
      }),
    ).toBeNull();
  });
});

describe('subscriptionStreamWebhook: the webhook source mapping of a subscription stream', () => {
  it("sends no charge webhook itself: those are the charge ledger's, with its row as data.charge", () => {
    const events = subscribedEvents();
    expect(subscriptionStreamWebhook(events[1] as SubscriptionEvent, events)).toBeNull();
  });

  it('no webhook for the brake and the cancel confirmation; the history must end with the event', () => {
    const events = subscribedEvents();
    const confirmed = decideSubscription(
      { type: 'ConfirmCancel', by: 'merchant', txHash: tx(9), now },
      stateOf(events),
    );
    expect(
      subscriptionStreamWebhook(confirmed[0] as SubscriptionEvent, [...events, ...confirmed]),
    ).toBeNull();
    expect(() => subscriptionStreamWebhook(events[0] as SubscriptionEvent, events)).toThrow();
  });
});

describe("chargeWebhookDataAsOf: the subscription side of the ledger's charge webhooks", () => {
  it('a charge success: the subscription as of its fact (next nonce) whatever came later; data.charge is the row given', () => {
    const events = subscribedEvents();
    const later = decideSubscription(
      { type: 'ConfirmCancel', by: 'merchant', txHash: tx(9), now },
      stateOf(events),
    );
    const row = charge({
      id: succeededChargeId(CHAIN, SUB_ID, 0),
      charge_nonce: 0,
      tx_hash: tx(1),
      created_at: '2026-06-01T10:00:01.000Z',
      fiat_amount: '150000',
    });
    const data = chargeWebhookDataAsOf([...events, ...later], row);
    expect(data.charge).toBe(row);
    expect(data.object).toMatchObject({
      status: 'active',
      charge_nonce: 1,
      subscription_charge_id: row.id,
      tx_hash: tx(1),
      fee: row.fee,
    });
  });

  it('a failed charge: no fee on data.object, the nonces equal; a charge the stream never recorded is refused', () => {
    const before = subscribedEvents();
    const failed = decideSubscription(
      {
        type: 'RecordChargeReverted',
        chargeId: 'subc_failed',
        nonce: 1,
        amount: '100',
        txHash: null,
        failureReason: 'InsufficientBalance',
        stage: 'simulation',
        landed: null,
        now,
      },
      stateOf(before),
    );
    const row = charge({
      id: 'subc_failed',
      fee: '0',
      block_number: '0',
      tx_hash: null,
      status: 'failed',
      failure_reason: 'InsufficientBalance',
    });
    const data = chargeWebhookDataAsOf([...before, ...failed], row);
    expect(data.object).toMatchObject({
      charge_nonce: 1,
      failure_reason: 'InsufficientBalance',
      tx_hash: null,
    });
    expect(data.object).not.toHaveProperty('fee');
    expect(() => chargeWebhookDataAsOf(before, row)).toThrow(RangeError);
  });

  it('the subscription of a charge shows the brake decided with it: paused by the failure, released by the next success', () => {
    const before = subscribedEvents();
    const failed = decideSubscription(
      {
        type: 'RecordChargeReverted',
        chargeId: 'subc_reverted',
        nonce: 1,
        amount: '100',
        txHash: tx(7),
        failureReason: 'InsufficientBalance',
        stage: 'receipt',
        landed: null,
        now,
      },
      stateOf(before),
    );
    expect(failed.map((e) => e.type)).toEqual(['SubscriptionChargeFailed.v1', 'SubscriptionPaused.v1']);
    const failedRow = charge({
      id: 'subc_reverted',
      fee: '0',
      block_number: '0',
      tx_hash: tx(7),
      status: 'failed',
      failure_reason: 'InsufficientBalance',
    });
    expect(chargeWebhookDataAsOf([...before, ...failed], failedRow).object).toMatchObject({ paused: true });

    const succeeded = decideSubscription(
      {
        type: 'RecordChargeSucceeded',
        charge: chargeLog(1, 2_000_000n, 60n, 7_000_000n),
        writtenBy: 'api',
      },
      stateOf([...before, ...failed]),
    );
    expect(succeeded.map((e) => e.type)).toEqual([
      'SubscriptionChargeSucceeded.v1',
      'SubscriptionUnpaused.v1',
    ]);
    // A later failure's brake is not this charge's: the success still shows the brake released.
    const later = decideSubscription(
      {
        type: 'RecordChargeReverted',
        chargeId: 'subc_later',
        nonce: 2,
        amount: '100',
        txHash: tx(8),
        failureReason: 'InsufficientBalance',
        stage: 'receipt',
        landed: null,
        now,
      },
      stateOf([...before, ...failed, ...succeeded]),
    );
    const history = [...before, ...failed, ...succeeded, ...later];
    expect(chargeWebhookDataAsOf(history, charge()).object).toMatchObject({ paused: false, charge_nonce: 2 });
    expect(chargeWebhookDataAsOf(history, failedRow).object).toMatchObject({ paused: true, charge_nonce: 1 });
  });
});
