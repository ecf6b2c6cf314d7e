import type { ChargeEvent, ChargeFacts } from './charge.events';
import {
  chargeLedgerWebhook,
  chargeRowAsOfRecording,
  chargeWebhookRelatedStreams,
  type SubscriptionChargeWebhookView,
} from './charge.webhooks';

const facts: ChargeFacts = {
  chargeId: 'subc_1',
  subscriptionId: `0x${'5a'.repeat(32)}`,
  subscriber: '0x1111111111111111111111111111111111111111',
  chain: 'eip155:8453',
  nonce: 0,
  amount: '2000000',
  fee: '1200',
  txHash: `0x${'77'.repeat(32)}`,
  blockNumber: '1234',
  chargedAt: '2026-06-01T09:59:58.000Z',
  status: 'succeeded',
  failureReason: null,
};
const recorded: ChargeEvent = {
  type: 'ChargeRecorded.v1',
  data: {
    ...facts,
    fiat: { fiatAmount: '150000', fiatCurrency: 'ARS', settlementStatus: 'pending' },
    writtenBy: 'api',
    recordedAt: '2026-06-01T10:00:00.000Z',
  },
};
const subscriptionStream = [{ type: 'SubscriptionCreated.v1', data: {} }];
const view: SubscriptionChargeWebhookView = {
  streamIdOf: (id) => `subscription-${id}`,
  chargeWebhookData: (history, charge) =>
    history === subscriptionStream ? { object: { object: 'subscription' }, charge } : null,
};

describe('chargeLedgerWebhook: the charge ledger webhook source mapping', () => {
  it('a recorded charge: charge_succeeded with data.charge = the row as of the event, reading the subscription stream', () => {
    expect(chargeWebhookRelatedStreams(recorded, [recorded], view)).toEqual([
      `subscription-${facts.subscriptionId}`,
    ]);
    const hook = chargeLedgerWebhook(recorded, [recorded], subscriptionStream, view);
    expect(hook?.type).toBe('subscription.charge_succeeded');
    expect(hook?.data).toMatchObject({
      charge: {
        id: 'subc_1',
        created_at: '2026-06-01T10:00:00.000Z',
        fiat_amount: '150000',
        fiat_currency: 'ARS',
        settlement_status: 'pending',
      },
    });
  });

  it('settlement facts: the summary, no subscription stream read; a delayed one without reason has none', () => {
    const delayed: ChargeEvent = {
      type: 'ChargeSettlementDelayed.v1',
      data: { reason: null, delayedAt: '2026-06-01T16:00:00.000Z' },
    };
    expect(chargeWebhookRelatedStreams(delayed, [recorded, delayed], view)).toEqual([]);
    expect(chargeLedgerWebhook(delayed, [recorded, delayed], undefined, view)).toEqual({
      type: 'subscription.charge_settlement_delayed',
      data: {
        object: {
          subscription_id: facts.subscriptionId,
          charge_nonce: 0,
          amount: '2000000',
          fiat_amount: '150000',
          fiat_currency: 'ARS',
          settlement_status: 'delayed',
        },
      },
    });
    const failed: ChargeEvent = {
      type: 'ChargeSettlementFailed.v1',
      data: { reason: 'rampoff_withdraw_failed', failedAt: '2026-06-02T10:00:00.000Z' },
    };
    expect(
      chargeLedgerWebhook(failed, [recorded, delayed, failed], undefined, view)?.data.object,
    ).toMatchObject({
      settlement_status: 'failed',
      settlement_failure_reason: 'rampoff_withdraw_failed',
    });
  });

  it("a recorded charge's webhook names the charge fact it records (the n-th recording, the n-th fact of that charge); a backfill none", () => {
    const anyView: SubscriptionChargeWebhookView = {
      ...view,
      chargeWebhookData: (_, charge) => ({ object: { object: 'subscription' }, charge }),
    };
    const charge = (type: string, chargeId: string) => ({ type, data: { chargeId } });
    const stream = [
      { type: 'SubscriptionCreated.v1', data: {} },
      charge('SubscriptionChargeSucceeded.v1', 'subc_1'),
      charge('SubscriptionChargeFailed.v1', 'subc_2'),
      charge('SubscriptionChargeRetracted.v1', 'subc_1'),
      charge('SubscriptionChargeSucceeded.v1', 'subc_1'),
    ];
    expect(chargeLedgerWebhook(recorded, [recorded], stream, anyView)?.recordsFact).toBe(1);
    const lost: ChargeEvent = {
      type: 'ChargeLostToReorg.v1',
      data: { txHash: facts.txHash ?? '', lostAt: '2026-06-01T10:05:00.000Z' },
    };
    expect(chargeLedgerWebhook(lost, [recorded, lost], stream, anyView)?.recordsFact).toBeUndefined();
    expect(chargeLedgerWebhook(recorded, [recorded, lost, recorded], stream, anyView)?.recordsFact).toBe(4);
    const backfilled: ChargeEvent = {
      type: 'ChargeFiatBackfilled.v1',
      data: {
        fiat: { fiatAmount: '150000', fiatCurrency: 'ARS', settlementStatus: 'pending' },
        backfilledAt: '2026-06-01T10:01:00.000Z',
      },
    };
    expect(chargeLedgerWebhook(backfilled, [recorded, backfilled], stream, anyView)).not.toHaveProperty(
      'recordsFact',
    );
    // A stream without the fact (not expected: the ledger records from it): the webhook keeps its own id.
    expect(chargeLedgerWebhook(recorded, [recorded], stream.slice(0, 1), anyView)).not.toHaveProperty(
      'recordsFact',
    );
  });

  it('sends nothing for a fact this release does not know, nor when the subscription view has nothing to send', () => {
    const unknown = { type: 'ChargeSomethingNew.v9', data: {} };
    expect(chargeLedgerWebhook(unknown, [recorded, unknown], undefined, view)).toBeNull();
    expect(chargeLedgerWebhook(recorded, [recorded], [], view)).toBeNull();
    expect(() => chargeLedgerWebhook(recorded, [recorded], undefined, view)).toThrow();
  });
});

describe('chargeRowAsOfRecording: data.first_charge of subscription_checkout.completed', () => {
  const lost: ChargeEvent = {
    type: 'ChargeLostToReorg.v1',
    data: { txHash: facts.txHash ?? '', lostAt: '2026-06-01T10:05:00.000Z' },
  };
  const again: ChargeEvent = {
    type: 'ChargeRecorded.v1',
    data: {
      ...facts,
      blockNumber: '1240',
      fiat: null,
      writtenBy: 'indexer',
      recordedAt: '2026-06-01T10:06:00.000Z',
    },
  };
  const settled: ChargeEvent = { type: 'ChargeSettled.v1', data: { settledAt: '2026-06-01T11:00:00.000Z' } };

  it('given a charge recorded, lost to a reorg and recorded again, then each completion gets the row as of its own recording, whatever followed', () => {
    const stream = [recorded, settled, lost, again];
    expect(chargeRowAsOfRecording(stream, 1)).toEqual({
      object: 'subscription_charge',
      id: 'subc_1',
      subscription_id: facts.subscriptionId,
      subscriber: facts.subscriber,
      amount: '2000000',
      fee: '1200',
      tx_hash: facts.txHash,
      chain: 'eip155:8453',
      charge_nonce: 0,
      charged_at: facts.chargedAt,
      block_number: '1234',
      created_at: '2026-06-01T10:00:00.000Z',
      status: 'succeeded',
      failure_reason: null,
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: 'pending',
      settlement_exposure: null,
    });
    expect(chargeRowAsOfRecording(stream, 2)).toMatchObject({
      status: 'succeeded',
      block_number: '1240',
      failure_reason: null,
    });
  });

  it('given fewer recordings than the completion needs (the ledger has not written it yet), then null', () => {
    expect(chargeRowAsOfRecording([], 1)).toBeNull();
    expect(chargeRowAsOfRecording([recorded, lost], 2)).toBeNull();
    expect(chargeRowAsOfRecording([recorded, { type: 'ChargeSomethingNew.v9', data: {} }], 1)).toBeNull();
  });
});
