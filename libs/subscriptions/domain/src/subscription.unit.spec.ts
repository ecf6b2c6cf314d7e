import { DomainError } from '@stablepay/util';
import {
  decideSubscription,
  initialSubscriptionState,
  type QuotedFiat,
  type SubscriptionCommand,
  subscriptionObject,
  subscriptionObjectAt,
  succeededChargeId,
  windowFacts,
} from './subscription';
import type { ChargeObservation, SubscriptionEvent } from './subscription.events';
import {
  CHAIN,
  chargeLog,
  createdData,
  iso,
  PERIOD,
  START,
  stateOf,
  SUB_ID,
  SUBSCRIPTION_FIELDS,
  subscribed,
  subscribedEvents,
  tx,
} from './subscription.test-fixtures';

function given(...events: SubscriptionEvent[]) {
  const state = stateOf(events);
  return {
    state,
    when: (command: SubscriptionCommand) => {
      const run = () => decideSubscription(command, state);
      return {
        then: (expected: SubscriptionEvent[]) => expect(run()).toEqual(expected),
        thenTypes: (types: SubscriptionEvent['type'][]) => expect(run().map((e) => e.type)).toEqual(types),
        events: run,
        thenError: (shape: Partial<DomainError>) => {
          expect(run).toThrow(DomainError);
          try {
            run();
          } catch (e) {
            expect(e).toMatchObject(shape);
          }
        },
      };
    },
  };
}

const now = new Date('2026-06-01T10:00:00.000Z');

describe('Subscription: created from the confirmed on-chain subscribe', () => {
  it('the subscribe call records SubscriptionCreated and the first charge with nonce 0; charge_nonce is then 1', () => {
    const events = subscribedEvents();
    expect(events.map((e) => e.type)).toEqual(['SubscriptionCreated.v1', 'SubscriptionChargeSucceeded.v1']);
    const object = subscriptionObject(stateOf(events), START + 10n);
    expect(object).toMatchObject({
      object: 'subscription',
      id: SUB_ID,
      subscription_id: SUB_ID,
      status: 'active',
      charge_nonce: 1,
      cap_amount: '10000000',
      budget: '25000000',
      spent_this_period: '5000000',
      remaining_budget: '20000000',
      last_charged_at: iso(START),
      next_charge_at: iso(START + BigInt(PERIOD)),
      paused: false,
      flagged: false,
    });
  });

  it('every field of SPEC Resources > Subscription is in the object', () => {
    const object = subscriptionObject(stateOf(subscribedEvents()), START);
    expect(Object.keys(object).sort()).toEqual([...SUBSCRIPTION_FIELDS].sort());
  });

  it('the indexer reporting the same subscribe again records nothing (both write paths, redeliveries)', () => {
    given(...subscribedEvents())
      .when({ ...subscribed, writtenBy: 'indexer' })
      .then([]);
  });

  it('the indexer may record the creation before the first charge; the charge then follows once', () => {
    const createdOnly = decideSubscription(
      { ...subscribed, firstCharge: null, writtenBy: 'indexer' },
      initialSubscriptionState(),
    );
    expect(createdOnly.map((e) => e.type)).toEqual(['SubscriptionCreated.v1']);
    given(...createdOnly)
      .when({
        type: 'RecordChargeSucceeded',
        charge: chargeLog(0, 5_000_000n, 0n, 5_000_000n, 1),
        writtenBy: 'indexer',
      })
      .thenTypes(['SubscriptionChargeSucceeded.v1']);
  });

  it('the subscribe transaction charges nonce 0 only', () => {
    given()
      .when({ ...subscribed, firstCharge: chargeLog(1, 5_000_000n, 0n, 5_000_000n) })
      .thenError({ code: 'first_charge_nonce' });
  });

  it('a charge for an unknown subscription is refused', () => {
    given()
      .when({ type: 'RecordChargeSucceeded', charge: chargeLog(1, 1n, 0n, 1n), writtenBy: 'indexer' })
      .thenError({ status: 404 });
  });
});

const QUOTE_A = `0x${'a'.repeat(64)}`;
const QUOTE_B = `0x${'b'.repeat(64)}`;

describe('Subscription charges: nonce bookkeeping (charge_nonce is the NEXT nonce)', () => {
  it("an ad-hoc charge records the fiat amount its quote converted in the plan's currency (what a fiat payout settles), not the plan price", () => {
    const charge = { ...chargeLog(1, 2_000_000n, 60n, 7_000_000n), quoteHash: QUOTE_A };
    const chargedWith = (quotedFiat: QuotedFiat | null | undefined) =>
      decideSubscription(
        { type: 'RecordChargeSucceeded', charge, writtenBy: 'api', quotedFiat },
        stateOf(subscribedEvents()),
      )[0]?.data;
    expect(chargedWith({ amount: '123457', currency: 'ARS', quoteHash: QUOTE_A })).toMatchObject({
      quotedFiatAmount: '123457',
    });
    // A quote in another currency than the plan's (or none) says nothing about the plan's fiat: the plan price holds.
    for (const quotedFiat of [{ amount: '123457', currency: 'USD', quoteHash: QUOTE_A }, null, undefined])
      expect(chargedWith(quotedFiat)).not.toHaveProperty('quotedFiatAmount');
  });

  it("a charge found landed by another submitter under another quote's signature is not paid out at the requested quote's fiat amount", () => {
    // The merchant signs nonce 1 twice: a 1.00 ARS quote (A) it submits itself, a 1,000,000.00 ARS quote (B) it sends
    // to the charge call, whose attempt then reverts NonceAlreadyUsed on A's landed log.
    const landed = { ...chargeLog(1, 1_000n, 60n, 5_001_000n), quoteHash: QUOTE_A };
    const recorded = (quotedFiat: QuotedFiat) =>
      decideSubscription(
        {
          type: 'RecordChargeReverted',
          chargeId: 'subc_attempt1',
          nonce: 1,
          amount: '2000000000',
          txHash: null,
          failureReason: 'NonceAlreadyUsed',
          stage: 'simulation',
          landed,
          quotedFiat,
          now,
        },
        stateOf(subscribedEvents()),
      )[0]?.data;
    expect(recorded({ amount: '100000000', currency: 'ARS', quoteHash: QUOTE_B })).not.toHaveProperty(
      'quotedFiatAmount',
    );
    // The same signature landed by another submitter redeemed the requested quote: its fiat amount holds.
    expect(recorded({ amount: '100', currency: 'ARS', quoteHash: QUOTE_A })).toMatchObject({
      quotedFiatAmount: '100',
      amount: '1000',
    });
  });

  it('a succeeded charge advances charge_nonce by one and carries the subc_ id of (chain, subscription, nonce)', () => {
    const events = given(...subscribedEvents())
      .when({
        type: 'RecordChargeSucceeded',
        charge: chargeLog(1, 2_000_000n, 60n, 7_000_000n),
        writtenBy: 'api',
      })
      .events();
    expect(events).toEqual([
      {
        type: 'SubscriptionChargeSucceeded.v1',
        data: {
          chargeId: succeededChargeId(CHAIN, SUB_ID, 1),
          ...chargeLog(1, 2_000_000n, 60n, 7_000_000n),
          writtenBy: 'api',
          landedByAnotherSubmitter: false,
        },
      },
    ]);
    expect(subscriptionObject(stateOf([...subscribedEvents(), ...events]), START + 60n).charge_nonce).toBe(2);
  });

  it('the subc_ id is stable across the API and indexer paths: the second writer records nothing', () => {
    const apiWrote = decideSubscription(
      { type: 'RecordChargeSucceeded', charge: chargeLog(1, 2_000_000n, 60n, 7_000_000n), writtenBy: 'api' },
      stateOf(subscribedEvents()),
    );
    given(...subscribedEvents(), ...apiWrote)
      .when({
        type: 'RecordChargeSucceeded',
        charge: chargeLog(1, 2_000_000n, 60n, 7_000_000n),
        writtenBy: 'indexer',
      })
      .then([]);
    expect(succeededChargeId(CHAIN, SUB_ID, 1)).toMatch(/^subc_[0-9a-f]{26}$/);
    expect(succeededChargeId(CHAIN, SUB_ID.toUpperCase().replace('0X', '0x'), 1)).toBe(
      succeededChargeId(CHAIN, SUB_ID, 1),
    );
  });

  it('one nonce recorded with two different transactions is a conflict (only a reorg retraction can replace it)', () => {
    given(...subscribedEvents())
      .when({
        type: 'RecordChargeSucceeded',
        charge: chargeLog(0, 5_000_000n, 0n, 5_000_000n, 999),
        writtenBy: 'indexer',
      })
      .thenError({ code: 'charge_nonce_conflict', status: 409 });
  });

  it('a failed charge leaves charge_nonce where it was (data.charge.charge_nonce equals it, rule 4)', () => {
    const failed = given(...subscribedEvents())
      .when({
        type: 'RecordChargeReverted',
        chargeId: 'subc_attempt1',
        nonce: 1,
        amount: '2000000',
        txHash: null,
        failureReason: 'BudgetExceeded',
        stage: 'simulation',
        landed: null,
        now,
      })
      .events();
    expect(failed.map((e) => e.type)).toEqual(['SubscriptionChargeFailed.v1']);
    expect(subscriptionObject(stateOf([...subscribedEvents(), ...failed]), START).charge_nonce).toBe(1);
  });
});

describe('Subscription: tumbling window anchored at the on-chain start, in chain time (cap and budget rule 3)', () => {
  const history = () => [
    ...subscribedEvents(),
    ...decideSubscription(
      // Late in window 0 (a day before its end).
      {
        type: 'RecordChargeSucceeded',
        charge: chargeLog(1, 3_000_000n, BigInt(PERIOD - 86_400), 8_000_000n),
        writtenBy: 'api',
      },
      stateOf(subscribedEvents()),
    ),
  ];

  it('several charges in one window add up (rule 6); remaining_budget = budget - spent_this_period (rule 4)', () => {
    const object = subscriptionObject(stateOf(history()), START + BigInt(PERIOD) - 1n);
    expect(object).toMatchObject({ spent_this_period: '8000000', remaining_budget: '17000000' });
  });

  it('spent_this_period resets at the boundary counted from the start, not one period after last_charged_at', () => {
    const atBoundary = subscriptionObject(stateOf(history()), START + BigInt(PERIOD));
    expect(atBoundary).toMatchObject({
      spent_this_period: '0',
      remaining_budget: '25000000',
      last_charged_at: iso(START + BigInt(PERIOD - 86_400)),
      next_charge_at: iso(START + 2n * BigInt(PERIOD)),
    });
  });

  it('window spend follows the contract forward only, so a late-ingested older charge does not roll it back', () => {
    const state = stateOf(history());
    const lateOld = decideSubscription(
      { type: 'RecordChargeSucceeded', charge: chargeLog(5, 1n, 10n, 1n), writtenBy: 'indexer' },
      state,
    );
    expect(subscriptionObject(stateOf([...history(), ...lateOld]), START + 100n).spent_this_period).toBe(
      '8000000',
    );
  });

  it('a budget update carries the window state the contract reported', () => {
    const events = given(...history())
      .when({
        type: 'RecordBudgetUpdated',
        oldBudget: '25000000',
        newBudget: '5000000',
        windowIndex: '0',
        windowSpent: '8000000',
        txHash: tx(300),
        updatedAt: iso(START + 100n),
      })
      .events();
    // A budget lowered below the spend leaves nothing to charge this window, never a negative remainder.
    expect(subscriptionObject(stateOf([...history(), ...events]), START + 100n)).toMatchObject({
      budget: '5000000',
      remaining_budget: '0',
    });
  });
});

describe('Subscription status: active -> cancelling -> cancelled (cancelled_by)', () => {
  it('a confirmed merchant cancel makes it cancelling; the indexer then makes it cancelled by the merchant', () => {
    const confirmed = given(...subscribedEvents())
      .when({ type: 'ConfirmCancel', by: 'merchant', txHash: tx(400), now })
      .events();
    expect(subscriptionObject(stateOf([...subscribedEvents(), ...confirmed]), START)).toMatchObject({
      status: 'cancelling',
      next_charge_at: null,
    });
    const cancelled = given(...subscribedEvents(), ...confirmed)
      .when({ type: 'RecordCancelled', by: 'merchant', txHash: tx(400), cancelledAt: now.toISOString() })
      .events();
    expect(cancelled).toEqual([
      {
        type: 'SubscriptionCancelled.v1',
        data: { by: 'merchant', txHash: tx(400), cancelledAt: now.toISOString() },
      },
    ]);
    const state = stateOf([...subscribedEvents(), ...confirmed, ...cancelled]);
    expect(state.cancelledBy).toBe('merchant');
    expect(subscriptionObject(state, START).status).toBe('cancelled');
  });

  it('a subscriber cancel from the hosted page, seen only by the indexer, goes straight to cancelled', () => {
    given(...subscribedEvents())
      .when({ type: 'RecordCancelled', by: 'subscriber', txHash: tx(401), cancelledAt: now.toISOString() })
      .thenTypes(['SubscriptionCancelled.v1']);
  });

  it('cancelled is terminal: a second ingestion and a late confirmation record nothing', () => {
    const cancelled = decideSubscription(
      { type: 'RecordCancelled', by: 'subscriber', txHash: tx(401), cancelledAt: now.toISOString() },
      stateOf(subscribedEvents()),
    );
    given(...subscribedEvents(), ...cancelled)
      .when({ type: 'RecordCancelled', by: 'subscriber', txHash: tx(401), cancelledAt: now.toISOString() })
      .then([]);
    given(...subscribedEvents(), ...cancelled)
      .when({ type: 'ConfirmCancel', by: 'merchant', txHash: tx(402), now })
      .then([]);
  });
});

describe('Subscription paused brake (SPEC States > Subscription, paused table)', () => {
  const reverted = (
    reason: string,
    stage: 'simulation' | 'receipt',
    chargeId = 'subc_attempt1',
  ): SubscriptionCommand => ({
    type: 'RecordChargeReverted',
    chargeId,
    nonce: 1,
    amount: '2000000',
    txHash: stage === 'receipt' ? tx(500) : null,
    failureReason: reason,
    stage,
    landed: null,
    now,
  });

  it.each(['InsufficientBalance', 'InsufficientAllowance'])(
    'a charge rejected at simulation with %s fails and pauses',
    (reason) => {
      given(...subscribedEvents())
        .when(reverted(reason, 'simulation'))
        .then([
          {
            type: 'SubscriptionChargeFailed.v1',
            data: {
              chargeId: 'subc_attempt1',
              nonce: 1,
              amount: '2000000',
              txHash: null,
              failureReason: reason,
              stage: 'simulation',
              failedAt: now.toISOString(),
            },
          },
          {
            type: 'SubscriptionPaused.v1',
            data: { chargeId: 'subc_attempt1', failureReason: reason, pausedAt: now.toISOString() },
          },
        ]);
    },
  );

  it('another simulation rejection (BudgetExceeded) fails without pausing', () => {
    given(...subscribedEvents())
      .when(reverted('BudgetExceeded', 'simulation'))
      .thenTypes(['SubscriptionChargeFailed.v1']);
  });

  it.each(['BudgetExceeded', 'SubscriptionNotActive', 'ChargeAmountExceedsCap'])(
    'a receipt reverted on chain with %s (any code) fails and pauses',
    (reason) => {
      given(...subscribedEvents())
        .when(reverted(reason, 'receipt'))
        .thenTypes(['SubscriptionChargeFailed.v1', 'SubscriptionPaused.v1']);
    },
  );

  it('a second failure while paused records the failure only; the same attempt reported twice records nothing', () => {
    const first = decideSubscription(
      reverted('InsufficientBalance', 'simulation'),
      stateOf(subscribedEvents()),
    );
    given(...subscribedEvents(), ...first)
      .when(reverted('InsufficientBalance', 'receipt', 'subc_attempt2'))
      .thenTypes(['SubscriptionChargeFailed.v1']);
    given(...subscribedEvents(), ...first)
      .when(reverted('InsufficientBalance', 'simulation'))
      .then([]);
  });

  it('the next successful charge confirmed on chain unpauses', () => {
    const first = decideSubscription(
      reverted('InsufficientBalance', 'simulation'),
      stateOf(subscribedEvents()),
    );
    const success = given(...subscribedEvents(), ...first)
      .when({
        type: 'RecordChargeSucceeded',
        charge: chargeLog(1, 2_000_000n, 60n, 7_000_000n),
        writtenBy: 'api',
      })
      .events();
    expect(success.map((e) => e.type)).toEqual(['SubscriptionChargeSucceeded.v1', 'SubscriptionUnpaused.v1']);
    expect(stateOf([...subscribedEvents(), ...first]).paused).toBe(true);
    expect(stateOf([...subscribedEvents(), ...first, ...success]).paused).toBe(false);
  });
});

describe('Subscription: someone else submitted my signed charge first (NonceAlreadyUsed)', () => {
  const theirLog = chargeLog(1, 2_000_000n, 60n, 7_000_000n, 777);
  const ourRevert = (landed: ChargeObservation | null): SubscriptionCommand => ({
    type: 'RecordChargeReverted',
    chargeId: 'subc_ours',
    nonce: 1,
    amount: '2000000',
    txHash: tx(778),
    failureReason: 'NonceAlreadyUsed',
    stage: 'receipt',
    landed,
    now,
  });

  it('our reverted transaction with the SubscriptionCharged log of that nonce records a success: never failed, never paused', () => {
    given(...subscribedEvents())
      .when(ourRevert(theirLog))
      .then([
        {
          type: 'SubscriptionChargeSucceeded.v1',
          data: {
            chargeId: succeededChargeId(CHAIN, SUB_ID, 1),
            ...theirLog,
            writtenBy: 'api',
            landedByAnotherSubmitter: true,
          },
        },
      ]);
  });

  it('a landed log of another amount or quote is another signature of the nonce: refused nonce_already_used, nothing recorded (the indexer records it)', () => {
    // The merchant signed nonce 1 twice: 1,000 units it landed itself, 2,000,000 under quote A sent to the charge call.
    const signedA = { ...ourRevert(theirLog), quoteHash: QUOTE_A } as SubscriptionCommand;
    for (const landed of [
      { ...theirLog, amount: '1000' },
      { ...theirLog, quoteHash: QUOTE_B },
    ])
      given(...subscribedEvents())
        .when({ ...signedA, landed } as SubscriptionCommand)
        .thenError({ code: 'nonce_already_used', status: 409 });
    // The same terms landed by someone else are this charge.
    given(...subscribedEvents())
      .when({ ...signedA, landed: { ...theirLog, quoteHash: QUOTE_A } } as SubscriptionCommand)
      .then([
        {
          type: 'SubscriptionChargeSucceeded.v1',
          data: {
            chargeId: succeededChargeId(CHAIN, SUB_ID, 1),
            ...theirLog,
            quoteHash: QUOTE_A,
            writtenBy: 'api',
            landedByAnotherSubmitter: true,
          },
        },
      ]);
  });

  it('without the log the revert is not recorded at all (never as a failure): the service must read the log', () => {
    given(...subscribedEvents())
      .when(ourRevert(null))
      .thenError({ code: 'charge_landed_log_missing' });
  });

  it('when the indexer already recorded that nonce, our revert records nothing', () => {
    const indexed = decideSubscription(
      { type: 'RecordChargeSucceeded', charge: theirLog, writtenBy: 'indexer' },
      stateOf(subscribedEvents()),
    );
    given(...subscribedEvents(), ...indexed)
      .when(ourRevert(null))
      .then([]);
    // Even a revert reported under another name, for a nonce known to have charged, is not a failure.
    given(...subscribedEvents(), ...indexed)
      .when({ ...ourRevert(null), failureReason: 'InsufficientBalance' } as SubscriptionCommand)
      .then([]);
  });
});

describe('Subscription: subscriber-side changes and compliance', () => {
  it('cap updated by the subscriber changes cap_amount, once per transaction', () => {
    const cmd: SubscriptionCommand = {
      type: 'RecordCapUpdated',
      oldCap: '10000000',
      newCap: '12000000',
      txHash: tx(600),
      updatedAt: now.toISOString(),
    };
    const events = given(...subscribedEvents())
      .when(cmd)
      .events();
    expect(subscriptionObject(stateOf([...subscribedEvents(), ...events]), START).cap_amount).toBe(
      '12000000',
    );
    given(...subscribedEvents(), ...events)
      .when(cmd)
      .then([]);
  });

  it('migration moves the subscription to the new wallet and records its balance and allowance', () => {
    const cmd: SubscriptionCommand = {
      type: 'RecordMigrated',
      oldSubscriber: createdData.subscriber,
      newSubscriber: '0x2222222222222222222222222222222222222222',
      newSubscriberBalance: '90000000',
      newSubscriberAllowance:
        '115792089237316195423570985008687907853269984665640564039457584007913129639935',
      txHash: tx(700),
      migratedAt: now.toISOString(),
    };
    const events = given(...subscribedEvents())
      .when(cmd)
      .events();
    expect(events).toEqual([{ type: 'SubscriptionMigrated.v1', data: (({ type: _t, ...d }) => d)(cmd) }]);
    expect(subscriptionObject(stateOf([...subscribedEvents(), ...events]), START).subscriber).toBe(
      '0x2222222222222222222222222222222222222222',
    );
    given(...subscribedEvents(), ...events)
      .when(cmd)
      .then([]);
  });

  it('flagged once, naming the subscriber screened', () => {
    const events = given(...subscribedEvents())
      .when({ type: 'FlagSubscription', now })
      .events();
    expect(events).toEqual([
      {
        type: 'SubscriptionFlagged.v1',
        data: { subscriber: createdData.subscriber, flaggedAt: now.toISOString() },
      },
    ]);
    given(...subscribedEvents(), ...events)
      .when({ type: 'FlagSubscription', now })
      .then([]);
  });

  it('records a charge that paid a replaced settlement address once, and only for the recorded transaction', () => {
    const paid = {
      type: 'RecordChargePaidReplacedSettlement' as const,
      nonce: 0,
      txHash: tx(1).toUpperCase().replace('0X', '0x'),
      paidTo: '0x00000000000000000000000000000000000000a1',
      settlementAddress: '0x00000000000000000000000000000000000000b2',
      // The settings took b2 before the charge's block (START): a1 was already replaced when the charge paid it.
      settlementChangedAt: iso(START - 60n),
      now,
    };
    const events = given(...subscribedEvents())
      .when(paid)
      .events();
    expect(events).toEqual([
      {
        type: 'SubscriptionChargePaidReplacedSettlement.v1',
        data: {
          chargeId: succeededChargeId(CHAIN, SUB_ID, 0),
          nonce: 0,
          txHash: tx(1),
          paidTo: paid.paidTo,
          settlementAddress: paid.settlementAddress,
          recordedAt: now.toISOString(),
        },
      },
    ]);
    // The other write path reporting the same log, a nonce not charged, a transaction not the charge's: nothing.
    given(...subscribedEvents(), ...events)
      .when(paid)
      .then([]);
    given(...subscribedEvents())
      .when({ ...paid, nonce: 1 })
      .then([]);
    given(...subscribedEvents())
      .when({ ...paid, txHash: tx(2) })
      .then([]);
  });

  it('records nothing for a charge that paid the address in force at its block time, read after the settings changed (confirmation depth, re-scan)', () => {
    const late = {
      type: 'RecordChargePaidReplacedSettlement' as const,
      nonce: 0,
      txHash: tx(1),
      paidTo: '0x00000000000000000000000000000000000000a1',
      settlementAddress: '0x00000000000000000000000000000000000000b2',
      settlementChangedAt: iso(START + 3600n),
      now: new Date(Number(START + 7200n) * 1000),
    };
    given(...subscribedEvents())
      .when(late)
      .then([]);
    // The change within the charge's block second is not known to precede it: no alarm either.
    given(...subscribedEvents())
      .when({ ...late, settlementChangedAt: new Date(Number(START) * 1000 + 400).toISOString() })
      .then([]);
    given(...subscribedEvents())
      .when({ ...late, settlementChangedAt: iso(START) })
      .then([]);
    // The log naming the settings' own address (any case) is no replaced payment.
    given(...subscribedEvents())
      .when({
        ...late,
        paidTo: late.settlementAddress.toUpperCase().replace('0X', '0x'),
        settlementChangedAt: iso(START - 60n),
      })
      .then([]);
    // One second after the change, the replaced address is announced.
    given(...subscribedEvents())
      .when({ ...late, settlementChangedAt: iso(START - 1n) })
      .thenTypes(['SubscriptionChargePaidReplacedSettlement.v1']);
  });
});

describe('Subscription: the subscribe call reporting a first charge the indexer recorded first (fiat rule 3)', () => {
  const created = { ...subscribed, firstCharge: null, writtenBy: 'indexer' as const };
  const indexerFirst = (): SubscriptionEvent[] => {
    const createdEvents = decideSubscription(created, initialSubscriptionState());
    const charged = decideSubscription(
      {
        type: 'RecordChargeSucceeded',
        charge: chargeLog(0, 5_000_000n, 0n, 5_000_000n, 1),
        writtenBy: 'indexer',
      },
      stateOf(createdEvents),
    );
    return [...createdEvents, ...charged];
  };

  it('records SubscriptionFirstChargeReported once, naming the charge the indexer recorded', () => {
    const history = indexerFirst();
    const report = {
      type: 'RecordChargeSucceeded' as const,
      charge: chargeLog(0, 5_000_000n, 0n, 5_000_000n, 1),
      writtenBy: 'api' as const,
    };
    given(...history)
      .when(report)
      .then([
        {
          type: 'SubscriptionFirstChargeReported.v1',
          data: { chargeId: succeededChargeId(CHAIN, SUB_ID, 0), txHash: tx(1), reportedAt: iso(START) },
        },
      ]);
    const reported = [...history, ...decideSubscription(report, stateOf(history))];
    given(...reported)
      .when(report)
      .then([]);
  });

  it('is not recorded when the subscribe call wrote the first charge itself', () => {
    given(...subscribedEvents())
      .when({
        type: 'RecordChargeSucceeded',
        charge: chargeLog(0, 5_000_000n, 0n, 5_000_000n, 1),
        writtenBy: 'api',
      })
      .then([]);
  });
});

describe('Subscription object at chain time (the read model brings the window fields forward)', () => {
  it('keeps the stored spend inside its window and resets it at the boundary, never at last_charged_at', () => {
    const state = stateOf(subscribedEvents());
    const stored = subscriptionObject(state, START);
    const facts = windowFacts(state);
    expect(subscriptionObjectAt(stored, facts, START + BigInt(PERIOD) - 1n)).toMatchObject({
      spent_this_period: '5000000',
      remaining_budget: '20000000',
      next_charge_at: iso(START + BigInt(PERIOD)),
    });
    expect(subscriptionObjectAt(stored, facts, START + BigInt(PERIOD))).toMatchObject({
      spent_this_period: '0',
      remaining_budget: '25000000',
      next_charge_at: iso(START + 2n * BigInt(PERIOD)),
    });
    expect(subscriptionObjectAt(stored, facts, START + 5n)).toEqual(subscriptionObject(state, START + 5n));
  });
});
