import {
  type ChargeCommand,
  chargeObject,
  decideCharge,
  evolveCharge,
  initialChargeState,
  SETTLEMENT_DEADLINE_MS,
  settlementCheckAt,
} from './charge';
import type { ChargeEvent, ChargeFacts } from './charge.events';

/** docs/subscriptions.md, Reorgs: a succeeded charge whose transaction a reorg took out is marked, never deleted. */
const now = new Date('2026-06-01T10:00:00.000Z');
const later = new Date('2026-06-01T11:00:00.000Z');
const charge: ChargeFacts = {
  chargeId: 'subc_1',
  subscriptionId: `0x${'5a'.repeat(32)}`,
  subscriber: '0x1111111111111111111111111111111111111111',
  chain: 'eip155:8453',
  nonce: 1,
  amount: '2000000',
  fee: '0',
  txHash: `0x${'77'.repeat(32)}`,
  blockNumber: '1234',
  chargedAt: '2026-06-01T09:59:58.000Z',
  status: 'succeeded',
  failureReason: null,
};

function run(events: ChargeEvent[], command: ChargeCommand): ChargeEvent[] {
  const next = decideCharge(command, events.reduce(evolveCharge, initialChargeState()));
  events.push(...next);
  return next;
}
const objectOf = (events: ChargeEvent[]) => chargeObject(events.reduce(evolveCharge, initialChargeState()));
const recorded = (settlement: 'crypto' | 'fiat' = 'crypto'): ChargeEvent[] => {
  const events: ChargeEvent[] = [];
  run(events, {
    type: 'RecordCharge',
    charge,
    writtenBy: 'api',
    fiatContext: { price: '150000', priceCurrency: 'ARS', settlement },
    now,
  });
  return events;
};

describe('Charge ledger: a charge lost to a reorg', () => {
  it('shows failed with charge_lost_to_reorg, keeps its id, transaction and creation time, fee and block 0', () => {
    const events = recorded();
    run(events, { type: 'RecordLostToReorg', txHash: charge.txHash ?? '', now: later });
    expect(objectOf(events)).toMatchObject({
      id: 'subc_1',
      status: 'failed',
      failure_reason: 'charge_lost_to_reorg',
      tx_hash: charge.txHash,
      fee: '0',
      block_number: '0',
      created_at: now.toISOString(),
    });
  });

  it('a retraction of another transaction, or the same one twice, records nothing', () => {
    const events = recorded();
    expect(run(events, { type: 'RecordLostToReorg', txHash: `0x${'88'.repeat(32)}`, now: later })).toEqual(
      [],
    );
    run(events, { type: 'RecordLostToReorg', txHash: charge.txHash ?? '', now: later });
    expect(run(events, { type: 'RecordLostToReorg', txHash: charge.txHash ?? '', now: later })).toEqual([]);
  });

  it('re-included (by the indexer, in another block) the row is succeeded again, first written time and fiat fields kept', () => {
    const events = recorded();
    run(events, { type: 'RecordLostToReorg', txHash: charge.txHash ?? '', now: later });
    run(events, {
      type: 'RecordCharge',
      charge: { ...charge, blockNumber: '1240' },
      writtenBy: 'indexer',
      fiatContext: null,
      now: later,
    });
    expect(objectOf(events)).toMatchObject({
      status: 'succeeded',
      failure_reason: null,
      block_number: '1240',
      created_at: now.toISOString(),
      fiat_amount: '150000',
      fiat_currency: 'ARS',
    });
  });

  it('a fiat settlement of a charge lost to a reorg runs no further (no check time, no deadline outcome past 72 hours) and picks up again once the charge is re-included', () => {
    const events = recorded('fiat');
    const state = () => events.reduce(evolveCharge, initialChargeState());
    expect(settlementCheckAt(state())).not.toBeNull();
    run(events, { type: 'RecordLostToReorg', txHash: charge.txHash ?? '', now: later });

    expect(settlementCheckAt(state())).toBeNull();
    const pastDeadline = new Date(Date.parse(charge.chargedAt) + SETTLEMENT_DEADLINE_MS + 1_000);
    expect(run(events, { type: 'CheckSettlementDeadlines', now: pastDeadline })).toEqual([]);
    expect(objectOf(events)).toMatchObject({ status: 'failed', settlement_status: 'pending' });

    run(events, {
      type: 'RecordCharge',
      charge: { ...charge, blockNumber: '1240', chargedAt: later.toISOString() },
      writtenBy: 'indexer',
      fiatContext: null,
      now: later,
    });
    expect(settlementCheckAt(state())).not.toBeNull();
  });
});

describe('Charge ledger: a fiat payout for a charge a reorg took is a settlement exposure', () => {
  const lose = (events: ChargeEvent[]) =>
    run(events, { type: 'RecordLostToReorg', txHash: charge.txHash ?? '', now: later });
  const report = (events: ChargeEvent[], reportId: string) =>
    run(events, {
      type: 'RecordSettlementReport',
      reportId,
      kind: 'payout_completed',
      reportedAt: later,
      now: later,
    });
  const exposure = {
    reason: 'charge_lost_to_reorg',
    amount: '150000',
    currency: 'ARS',
    recorded_at: later.toISOString(),
  };

  it('paid out before the reorg: the loss records the exposure, settlement stays completed', () => {
    const events = recorded('fiat');
    report(events, 'rep_1');
    expect(objectOf(events)).toMatchObject({ settlement_status: 'completed', settlement_exposure: null });
    expect(lose(events).map((e) => e.type)).toEqual(['ChargeLostToReorg.v1', 'ChargeSettlementExposed.v1']);
    expect(objectOf(events)).toMatchObject({
      status: 'failed',
      settlement_status: 'completed',
      settlement_exposure: exposure,
    });
  });

  it('reported paid out while lost: the completion (charge_settled: the money went out) and the exposure, once', () => {
    const events = recorded('fiat');
    lose(events);
    expect(objectOf(events).settlement_exposure).toBeNull();
    expect(report(events, 'rep_1').map((e) => e.type)).toEqual([
      'ChargeSettlementReported.v1',
      'ChargeSettled.v1',
      'ChargeSettlementExposed.v1',
    ]);
    expect(objectOf(events).settlement_exposure).toEqual(exposure);
    expect(report(events, 'rep_2').map((e) => e.type)).toEqual(['ChargeSettlementReported.v1']);
    expect(lose(events)).toEqual([]);
  });

  it('re-included: the exposure ends (null); a second loss records it again', () => {
    const events = recorded('fiat');
    report(events, 'rep_1');
    lose(events);
    run(events, {
      type: 'RecordCharge',
      charge: { ...charge, blockNumber: '1240' },
      writtenBy: 'indexer',
      fiatContext: null,
      now: later,
    });
    expect(objectOf(events)).toMatchObject({ status: 'succeeded', settlement_exposure: null });
    expect(lose(events).map((e) => e.type)).toEqual(['ChargeLostToReorg.v1', 'ChargeSettlementExposed.v1']);
  });

  it('no payout, or none completed, is no exposure (crypto-settled, pending)', () => {
    const crypto = recorded('crypto');
    expect(lose(crypto).map((e) => e.type)).toEqual(['ChargeLostToReorg.v1']);
    const pending = recorded('fiat');
    expect(lose(pending).map((e) => e.type)).toEqual(['ChargeLostToReorg.v1']);
    expect(objectOf(pending).settlement_exposure).toBeNull();
  });

  it('the amount is what the payout paid out: an ad-hoc charge quoted another fiat amount', () => {
    const events: ChargeEvent[] = [];
    run(events, {
      type: 'RecordCharge',
      charge,
      writtenBy: 'api',
      fiatContext: { price: '150000', priceCurrency: 'ARS', settlement: 'fiat', quotedFiatAmount: '99000' },
      now,
    });
    report(events, 'rep_1');
    lose(events);
    expect(objectOf(events).settlement_exposure).toMatchObject({ amount: '99000', currency: 'ARS' });
  });
});
