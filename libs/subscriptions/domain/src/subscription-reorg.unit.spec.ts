import { decideSubscription, type SubscriptionCommand, subscriptionObject } from './subscription';
import type { SubscriptionEvent } from './subscription.events';
import { chargeWebhookDataAsOf, subscriptionStreamWebhook } from './subscription.webhooks';
import {
  chargeLog,
  createdData,
  iso,
  START,
  stateOf,
  SUB_ID,
  subscribed,
  subscribedEvents,
  tx,
} from './subscription.test-fixtures';

/** Docs: docs/subscriptions.md, Reorgs. A retraction folds a fact out; the events stay (a retraction is a fact too). */
const now = new Date('2026-06-01T10:00:00.000Z');

function run(events: SubscriptionEvent[], command: SubscriptionCommand): SubscriptionEvent[] {
  const next = decideSubscription(command, stateOf(events));
  events.push(...next);
  return next;
}

const lastWebhook = (events: SubscriptionEvent[]) => {
  const last = events.at(-1);
  if (!last) throw new Error('no event');
  return subscriptionStreamWebhook(last, events);
};

describe('Subscription: facts undone by a chain reorg', () => {
  it('a charge mined then reorged out: nonce free again, spend back, last_charged_at back; its charge_failed webhook data is as of the retraction', () => {
    const events = subscribedEvents();
    const charge = chargeLog(1, 4_000_000n, 3600n, 9_000_000n);
    run(events, { type: 'RecordChargeSucceeded', charge, writtenBy: 'api' });
    expect(subscriptionObject(stateOf(events), START + 3700n)).toMatchObject({
      charge_nonce: 2,
      spent_this_period: '9000000',
    });
    const retracted = run(events, { type: 'RetractCharge', nonce: 1, txHash: charge.txHash, now });
    expect(retracted.map((e) => e.type)).toEqual(['SubscriptionChargeRetracted.v1']);
    expect(subscriptionObject(stateOf(events), START + 3700n)).toMatchObject({
      charge_nonce: 1,
      spent_this_period: '5000000',
      remaining_budget: '20000000',
      last_charged_at: iso(START),
    });
    // The ledger's row as marked (charge_lost_to_reorg): data.object is the subscription as of the retraction.
    const chargeId = (retracted[0]?.data as { chargeId: string }).chargeId;
    const data = chargeWebhookDataAsOf(events, {
      object: 'subscription_charge',
      id: chargeId,
      subscription_id: SUB_ID,
      amount: '4000000',
      fee: '0',
      tx_hash: charge.txHash,
      block_number: '0',
      charged_at: charge.chargedAt,
      charge_nonce: 1,
      status: 'failed',
      failure_reason: 'charge_lost_to_reorg',
    });
    expect(data.object).toMatchObject({
      charge_nonce: 1,
      spent_this_period: '5000000',
      failure_reason: 'charge_lost_to_reorg',
      tx_hash: charge.txHash,
    });
  });

  it('the same retraction again, or a retraction of another transaction for the nonce, records nothing', () => {
    const events = subscribedEvents();
    const charge = chargeLog(1, 4_000_000n, 3600n, 9_000_000n);
    run(events, { type: 'RecordChargeSucceeded', charge, writtenBy: 'indexer' });
    expect(run(events, { type: 'RetractCharge', nonce: 1, txHash: tx(999), now })).toEqual([]);
    run(events, { type: 'RetractCharge', nonce: 1, txHash: charge.txHash, now });
    expect(run(events, { type: 'RetractCharge', nonce: 1, txHash: charge.txHash, now })).toEqual([]);
  });

  it('a charge re-included after its retraction is recorded again with the same subc_ id (a charge_succeeded again)', () => {
    const events = subscribedEvents();
    const charge = chargeLog(1, 4_000_000n, 3600n, 9_000_000n);
    const [first] = run(events, { type: 'RecordChargeSucceeded', charge, writtenBy: 'api' });
    run(events, { type: 'RetractCharge', nonce: 1, txHash: charge.txHash, now });
    const again = run(events, {
      type: 'RecordChargeSucceeded',
      charge: { ...charge, blockNumber: '2001' },
      writtenBy: 'indexer',
    });
    expect(again).toHaveLength(1);
    expect(again[0]?.type).toBe('SubscriptionChargeSucceeded.v1');
    expect((again[0]?.data as { chargeId: string }).chargeId).toBe(
      (first?.data as { chargeId: string }).chargeId,
    );
    expect(subscriptionObject(stateOf(events), START + 3700n)).toMatchObject({
      charge_nonce: 2,
      spent_this_period: '9000000',
    });
  });

  it('a cap update reorged out restores the earlier cap and can be recorded again; subscription.reorged names what was undone', () => {
    const events = subscribedEvents();
    const up = (n: number, cap: string) =>
      ({
        type: 'RecordCapUpdated',
        oldCap: '0',
        newCap: cap,
        txHash: tx(n),
        updatedAt: iso(START + 10n),
      }) as const;
    run(events, up(50, '7000000'));
    run(events, up(51, '8000000'));
    run(events, { type: 'RetractFact', fact: 'cap_updated', txHash: tx(51), now });
    expect(stateOf(events).cap).toBe(7_000_000n);
    expect(lastWebhook(events)).toEqual({
      type: 'subscription.reorged',
      data: {
        object: expect.objectContaining({ cap_amount: '7000000' }),
        reorged: { event_type: 'subscription.cap_updated', tx_hash: tx(51) },
      },
    });
    run(events, { type: 'RetractFact', fact: 'cap_updated', txHash: tx(50), now });
    expect(stateOf(events).cap).toBe(BigInt(createdData.cap));
    expect(run(events, up(51, '8000000')).map((e) => e.type)).toEqual(['SubscriptionCapUpdated.v1']);
    expect(stateOf(events).cap).toBe(8_000_000n);
  });

  it('a budget update reorged out restores the budget; the window keeps the spend the charges reported', () => {
    const events = subscribedEvents();
    run(events, {
      type: 'RecordBudgetUpdated',
      oldBudget: createdData.budget,
      newBudget: '9000000',
      windowIndex: '0',
      windowSpent: '5000000',
      txHash: tx(60),
      updatedAt: iso(START + 10n),
    });
    expect(subscriptionObject(stateOf(events), START + 20n)).toMatchObject({
      budget: '9000000',
      remaining_budget: '4000000',
    });
    run(events, { type: 'RetractFact', fact: 'budget_updated', txHash: tx(60), now });
    expect(subscriptionObject(stateOf(events), START + 20n)).toMatchObject({
      budget: createdData.budget,
      spent_this_period: '5000000',
      remaining_budget: '20000000',
    });
  });

  it('a migration reorged out gives the subscription back to the old wallet', () => {
    const events = subscribedEvents();
    const next = '0x2222222222222222222222222222222222222222';
    run(events, {
      type: 'RecordMigrated',
      oldSubscriber: createdData.subscriber,
      newSubscriber: next,
      newSubscriberBalance: '1',
      newSubscriberAllowance: '1',
      txHash: tx(70),
      migratedAt: iso(START + 10n),
    });
    expect(stateOf(events).subscriber).toBe(next);
    run(events, { type: 'RetractFact', fact: 'migrated', txHash: tx(70), now });
    expect(stateOf(events).subscriber).toBe(createdData.subscriber);
  });

  it('a cancellation reorged out makes the subscription active again (charges eligible); a confirmed cancel of another tx stays', () => {
    const events = subscribedEvents();
    run(events, { type: 'ConfirmCancel', by: 'merchant', txHash: tx(80), now });
    run(events, { type: 'RecordCancelled', by: 'merchant', txHash: tx(80), cancelledAt: iso(START + 10n) });
    expect(run(events, { type: 'RetractFact', fact: 'cancelled', txHash: tx(81), now })).toEqual([]);
    run(events, { type: 'RetractFact', fact: 'cancelled', txHash: tx(80), now });
    expect(subscriptionObject(stateOf(events), START + 20n)).toMatchObject({ status: 'active' });
    expect(stateOf(events).cancelledBy).toBeNull();
    // Re-included: cancelled again.
    run(events, { type: 'RecordCancelled', by: 'merchant', txHash: tx(80), cancelledAt: iso(START + 30n) });
    expect(stateOf(events).status).toBe('cancelled');
  });

  it('the subscribe transaction reorged out: shown cancelled (no charge eligible) until re-included', () => {
    const events = subscribedEvents();
    run(events, { type: 'RetractCharge', nonce: 0, txHash: createdData.txHash, now });
    run(events, { type: 'RetractFact', fact: 'created', txHash: createdData.txHash, now });
    expect(subscriptionObject(stateOf(events), START + 20n)).toMatchObject({
      status: 'cancelled',
      charge_nonce: 0,
      spent_this_period: '0',
      next_charge_at: null,
    });
    expect(run(events, subscribed).map((e) => e.type)).toEqual([
      'SubscriptionCreated.v1',
      'SubscriptionChargeSucceeded.v1',
    ]);
    expect(subscriptionObject(stateOf(events), START + 20n)).toMatchObject({
      status: 'active',
      charge_nonce: 1,
    });
  });
});
