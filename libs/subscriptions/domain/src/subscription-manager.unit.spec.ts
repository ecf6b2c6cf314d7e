import { chargePreflight } from './charge-preflight';
import { decideSubscription, type SubscriptionCommand } from './subscription';
import type { SubscriptionEvent } from './subscription.events';
import {
  decideSubscriptionManager,
  evolveSubscriptionManager,
  initialSubscriptionManagerState,
  pausedBy,
  type SubscriptionManagerCommand,
  type SubscriptionManagerEvent,
} from './subscription-manager';
import { START, stateOf, SUB_ID, subscribedEvents, tx } from './subscription.test-fixtures';

/** docs/subscriptions.md, Manager events. */
const now = new Date('2026-06-01T10:00:00.000Z');
const at = now.toISOString();

function manager(...commands: SubscriptionManagerCommand[]) {
  const events: SubscriptionManagerEvent[] = [];
  for (const command of commands) {
    const state = events.reduce(evolveSubscriptionManager, initialSubscriptionManagerState());
    events.push(...decideSubscriptionManager(command, state));
  }
  return { events, state: events.reduce(evolveSubscriptionManager, initialSubscriptionManagerState()) };
}
const change = (paused: boolean, role: '0' | '1', n: number): SubscriptionManagerCommand => ({
  type: 'RecordManagerPauseChange',
  paused,
  role,
  account: '0x1111111111111111111111111111111111111111',
  txHash: tx(n),
  at,
});

describe('SubscriptionManager: the pausers brake', () => {
  it('each pauser holds its own flag: paused while either is on', () => {
    expect(pausedBy(manager(change(true, '0', 1)).state)).toEqual(['merchant']);
    expect(pausedBy(manager(change(true, '0', 1), change(true, '1', 2)).state)).toEqual([
      'merchant',
      'operator',
    ]);
    expect(
      pausedBy(manager(change(true, '0', 1), change(true, '1', 2), change(false, '0', 3)).state),
    ).toEqual(['operator']);
  });

  it('a redelivered log records nothing; a retracted one is folded out', () => {
    const { events, state } = manager(change(true, '0', 1), change(true, '0', 1));
    expect(events).toHaveLength(1);
    const retracted = manager(change(true, '0', 1), {
      type: 'RetractManagerPauseChange',
      txHash: tx(1),
      now,
    });
    expect(retracted.events.at(-1)?.type).toBe('SubscriptionManagerPauseRetracted.v1');
    expect(pausedBy(retracted.state)).toEqual([]);
    expect(pausedBy(state)).toEqual(['merchant']);
  });

  it('the charge preflight refuses manager_paused while a pauser holds the brake', () => {
    const result = chargePreflight({
      state: stateOf(subscribedEvents()),
      request: {
        subscriptionId: SUB_ID,
        amount: 1n,
        nonce: 1,
        deadline: START + 600n,
        quoteHash: `0x${'0'.repeat(64)}`,
        quoteCode: null,
      },
      quote: null,
      signatureValid: true,
      chainNow: START + 10n,
      now,
      settlement: { mode: 'crypto' },
      managerPausedBy: ['merchant'],
    });
    expect(result).toMatchObject({ outcome: 'rejected', code: 'manager_paused', status: 409 });
  });
});

describe('Subscription: migration proposals', () => {
  const wallet = '0x2222222222222222222222222222222222222222';
  const run = (events: SubscriptionEvent[], command: SubscriptionCommand) => {
    const next = decideSubscription(command, stateOf(events));
    events.push(...next);
    return next;
  };
  const proposed = (n: number, to = wallet): SubscriptionCommand => ({
    type: 'RecordMigrationProposed',
    proposedSubscriber: to,
    txHash: tx(n),
    at,
  });

  it('a proposal is pending until voided by a change of terms; a repeat of either records nothing', () => {
    const events = subscribedEvents();
    expect(run(events, proposed(10)).map((e) => e.type)).toEqual(['SubscriptionMigrationProposed.v1']);
    expect(run(events, proposed(10))).toEqual([]);
    expect(stateOf(events).pendingMigration).toEqual({ proposedSubscriber: wallet, txHash: tx(10) });
    const voided: SubscriptionCommand = {
      type: 'RecordMigrationVoided',
      proposedSubscriber: wallet,
      txHash: tx(11),
      at,
    };
    expect(run(events, voided).map((e) => e.type)).toEqual(['SubscriptionMigrationVoided.v1']);
    expect(run(events, voided)).toEqual([]);
    expect(stateOf(events).pendingMigration).toBeNull();
  });

  it('the zero address withdraws; an accepted migration clears the proposal; a retracted proposal is gone', () => {
    const events = subscribedEvents();
    run(events, proposed(10));
    run(events, proposed(12, `0x${'0'.repeat(40)}`));
    expect(stateOf(events).pendingMigration).toBeNull();
    run(events, proposed(13));
    run(events, {
      type: 'RecordMigrated',
      oldSubscriber: '0x1111111111111111111111111111111111111111',
      newSubscriber: wallet,
      newSubscriberBalance: '0',
      newSubscriberAllowance: '0',
      txHash: tx(14),
      migratedAt: at,
    });
    expect(stateOf(events).pendingMigration).toBeNull();
    run(events, proposed(15));
    run(events, { type: 'RetractFact', fact: 'migration_proposed', txHash: tx(15), now });
    expect(stateOf(events).pendingMigration).toBeNull();
  });
});
