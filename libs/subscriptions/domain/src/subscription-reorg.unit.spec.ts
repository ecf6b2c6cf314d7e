import { decideSubscription, type SubscriptionCommand, subscriptionObject } from './subscription';
import type { ChargeObservation, SubscriptionEvent } from './subscription.events';
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

/** The ledger's row of a charge a reorg took out (charge_lost_to_reorg), as the ledger marks it. */
const lostChargeRow = (retraction: SubscriptionEvent | undefined, charge: ChargeObservation) => ({
  object: 'subscription_charge' as const,
  id: (retraction?.data as { chargeId: string }).chargeId,
  subscription_id: SUB_ID,
  amount: charge.amount,
  fee: '0',
  tx_hash: charge.txHash,
  block_number: '0',
  charged_at: charge.chargedAt,
  charge_nonce: charge.nonce,
  status: 'failed' as const,
  failure_reason: 'charge_lost_to_reorg',
});

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
    const data = chargeWebhookDataAsOf(events, lostChargeRow(retracted[0], charge));
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

  describe('the paused brake (SPEC States > Subscription, paused table) follows the charges still on chain', () => {
    const failedForBalance = (nonce: number): SubscriptionCommand => ({
      type: 'RecordChargeReverted',
      chargeId: `subc_failed_${nonce}`,
      nonce,
      amount: '4000000',
      txHash: null,
      failureReason: 'InsufficientBalance',
      stage: 'simulation',
      landed: null,
      now,
    });

    it('given a paused subscription released by a successful charge, when that charge is reorged out, then it is paused again; when re-included, released again', () => {
      const events = subscribedEvents();
      run(events, failedForBalance(1));
      expect(stateOf(events).paused).toBe(true);
      const charge = chargeLog(1, 4_000_000n, 3600n, 9_000_000n);
      const released = run(events, { type: 'RecordChargeSucceeded', charge, writtenBy: 'api' });
      expect(released.map((e) => e.type)).toEqual([
        'SubscriptionChargeSucceeded.v1',
        'SubscriptionUnpaused.v1',
      ]);
      expect(stateOf(events).paused).toBe(false);

      const [retracted] = run(events, { type: 'RetractCharge', nonce: 1, txHash: charge.txHash, now });
      expect(subscriptionObject(stateOf(events), START + 3700n)).toMatchObject({
        paused: true,
        charge_nonce: 1,
      });
      // The lost charge's charge_failed webhook shows the subscription as of the retraction: paused again.
      const data = chargeWebhookDataAsOf(events, lostChargeRow(retracted, charge));
      expect(data.object).toMatchObject({ paused: true });

      const again = run(events, {
        type: 'RecordChargeSucceeded',
        charge: { ...charge, blockNumber: '2001' },
        writtenBy: 'indexer',
      });
      expect(again.map((e) => e.type)).toEqual(['SubscriptionChargeSucceeded.v1', 'SubscriptionUnpaused.v1']);
      expect(stateOf(events).paused).toBe(false);
    });

    it('given an active subscription never paused, when a charge is reorged out, then it stays unpaused', () => {
      const events = subscribedEvents();
      const charge = chargeLog(1, 4_000_000n, 3600n, 9_000_000n);
      run(events, { type: 'RecordChargeSucceeded', charge, writtenBy: 'api' });
      run(events, { type: 'RetractCharge', nonce: 1, txHash: charge.txHash, now });
      expect(stateOf(events).paused).toBe(false);
    });

    it('given a brake engaged again after a release, when the releasing charge is reorged out, then it stays engaged; a release by a charge still on chain stands', () => {
      const events = subscribedEvents();
      run(events, failedForBalance(1));
      const first = chargeLog(1, 1_000_000n, 3600n, 6_000_000n);
      run(events, { type: 'RecordChargeSucceeded', charge: first, writtenBy: 'api' });
      run(events, failedForBalance(2));
      expect(stateOf(events).paused).toBe(true);
      const second = chargeLog(2, 1_000_000n, 3700n, 7_000_000n);
      run(events, { type: 'RecordChargeSucceeded', charge: second, writtenBy: 'api' });
      // The later release stays: its charge is still on chain.
      run(events, { type: 'RetractCharge', nonce: 1, txHash: first.txHash, now });
      expect(stateOf(events).paused).toBe(false);
      run(events, { type: 'RetractCharge', nonce: 2, txHash: second.txHash, now });
      expect(stateOf(events).paused).toBe(true);
    });
  });

  describe('migration proposals follow the proposal, void and acceptance facts still on chain', () => {
    const wallet = '0x2222222222222222222222222222222222222222';
    const at = iso(START + 10n);
    const proposal = (n: number): SubscriptionCommand => ({
      type: 'RecordMigrationProposed',
      proposedSubscriber: wallet,
      txHash: tx(n),
      at,
    });
    const voided = (n: number): SubscriptionCommand => ({
      type: 'RecordMigrationVoided',
      proposedSubscriber: wallet,
      txHash: tx(n),
      at,
    });

    it('given a proposal voided by a change of terms, when the void is reorged out, then the proposal is pending again (no webhook); when re-included, voided again', () => {
      const events = subscribedEvents();
      run(events, proposal(90));
      run(events, voided(91));
      expect(stateOf(events).pendingMigration).toBeNull();
      const undone = run(events, { type: 'RetractFact', fact: 'migration_voided', txHash: tx(91), now });
      expect(undone.map((e) => e.type)).toEqual(['SubscriptionFactRetracted.v1']);
      expect(stateOf(events).pendingMigration).toEqual({ proposedSubscriber: wallet, txHash: tx(90) });
      // SPEC names no event for proposals, so their undo has no webhook either.
      expect(lastWebhook(events)).toBeNull();
      expect(run(events, { type: 'RetractFact', fact: 'migration_voided', txHash: tx(91), now })).toEqual([]);
      expect(run(events, voided(91)).map((e) => e.type)).toEqual(['SubscriptionMigrationVoided.v1']);
      expect(stateOf(events).pendingMigration).toBeNull();
    });

    it('given a void and the proposal both reorged out, then nothing is pending; a reorged acceptance brings the proposal back', () => {
      const events = subscribedEvents();
      run(events, proposal(92));
      run(events, voided(93));
      run(events, { type: 'RetractFact', fact: 'migration_voided', txHash: tx(93), now });
      run(events, { type: 'RetractFact', fact: 'migration_proposed', txHash: tx(92), now });
      expect(stateOf(events).pendingMigration).toBeNull();

      run(events, proposal(94));
      run(events, {
        type: 'RecordMigrated',
        oldSubscriber: createdData.subscriber,
        newSubscriber: wallet,
        newSubscriberBalance: '1',
        newSubscriberAllowance: '1',
        txHash: tx(95),
        migratedAt: at,
      });
      expect(stateOf(events).pendingMigration).toBeNull();
      run(events, { type: 'RetractFact', fact: 'migrated', txHash: tx(95), now });
      expect(stateOf(events)).toMatchObject({
        subscriber: createdData.subscriber,
        pendingMigration: { proposedSubscriber: wallet, txHash: tx(94) },
      });
    });
  });
});
