import {
  evolveProviderProgress,
  type FiatSettlement,
  initialProviderProgress,
  isSettlementOpen,
  type ProviderProgress,
  settlementDeadlineAt,
  settlementDeadlineOutcomes,
  type SettlementOutcome,
  settlementReportOutcomes,
} from '@stablepay/fiat-settlement';
import { conflict, notFound } from '@stablepay/util';
import {
  CHARGE_LOST_TO_REORG,
  type ChargeEvent,
  type ChargeFacts,
  type ChargeRecorded,
  type ChargeSettlementFailureReason,
  type FiatFields,
  type LedgerWritePath,
  type SettlementFailureReason,
  type SettlementReportKind,
  type SettlementStatus,
  SETTLEMENT_ADDRESS_REPLACED,
} from './charge.events';

/**
 * The Charge aggregate: one row of the charge ledger (SPEC Resources > Subscription charge). Written by the API path
 * (charge call, subscribe call) or by the indexer, whichever comes first; the second writer merges into it (SPEC fiat
 * field rule 5, rows unique by `tx_hash`): the stream is keyed by the `subc_` id, which the subscription aggregate
 * derives from (chain, subscription, nonce) for a succeeded charge, and a nonce charges in exactly one transaction, so
 * one id has one transaction; a second transaction for a recorded id is refused. One transaction may still carry
 * several charges (a batch), each its own row.
 *
 *   settlement (fiat-settled only): pending --delayed--> delayed; pending|delayed --settled--> completed;
 *                                   pending|delayed --failed--> failed
 *
 * The settlement transitions follow from the provider's reports (ChargeSettlementReported) and SPEC's deadlines
 * (decideSettlementReport, decideSettlementDeadlines; the clock is the command's `now`).
 */
export interface ChargeState {
  readonly recorded: ChargeRecorded['data'] | null;
  readonly fiat: FiatFields | null;
  readonly settlementStatus: SettlementStatus | null;
  readonly settlementFailureReason: ChargeSettlementFailureReason | null;
  /** Delay reasons already announced: a delayed event fires once per distinct reason (null: reason unknown). */
  readonly delayReasons: ReadonlyArray<SettlementFailureReason | null>;
  /** A reorg took the charge's transaction out (until a re-inclusion records it again). */
  readonly lostToReorg: boolean;
  /** What the settlement provider reported so far. */
  readonly provider: ProviderProgress;
  /** Fiat paid out for the charge a reorg took (ChargeSettlementExposed.v1), until a re-inclusion; else null. */
  readonly settlementExposure: { readonly reason: typeof CHARGE_LOST_TO_REORG; readonly at: string } | null;
}

export const initialChargeState = (): ChargeState => ({
  recorded: null,
  fiat: null,
  settlementStatus: null,
  settlementFailureReason: null,
  delayReasons: [],
  provider: initialProviderProgress(),
  lostToReorg: false,
  settlementExposure: null,
});

export function evolveCharge(state: ChargeState, event: ChargeEvent): ChargeState {
  switch (event.type) {
    case 'ChargeRecorded.v1':
      if (state.recorded)
        // Re-included after a reorg: the row keeps when it was first written and the fiat fields it had.
        return {
          ...state,
          recorded: { ...event.data, recordedAt: state.recorded.recordedAt },
          fiat: event.data.fiat ?? state.fiat,
          lostToReorg: false,
          // Re-included: the payout stands for a charge on chain again, nothing is owed back.
          settlementExposure: null,
        };
      return {
        ...state,
        recorded: event.data,
        fiat: event.data.fiat,
        settlementStatus: event.data.fiat?.settlementStatus ?? null,
      };
    case 'ChargeLostToReorg.v1':
      return { ...state, lostToReorg: true };
    case 'ChargeSettlementExposed.v1':
      return { ...state, settlementExposure: { reason: event.data.reason, at: event.data.at } };
    case 'ChargeFiatBackfilled.v1':
      return { ...state, fiat: event.data.fiat, settlementStatus: event.data.fiat.settlementStatus };
    case 'ChargeSettlementReported.v1':
      return { ...state, provider: evolveProviderProgress(state.provider, event.data) };
    case 'ChargeSettlementDelayed.v1':
      return {
        ...state,
        settlementStatus: 'delayed',
        settlementFailureReason: event.data.reason ?? state.settlementFailureReason,
        delayReasons: [...state.delayReasons, event.data.reason],
      };
    case 'ChargeSettled.v1':
      return { ...state, settlementStatus: 'completed' };
    case 'ChargeSettlementFailed.v1':
      return { ...state, settlementStatus: 'failed', settlementFailureReason: event.data.reason };
  }
}

/** The event types this release knows; a newer writer's fact changes nothing here (foldCharge skips it). */
export const KNOWN_CHARGE_EVENTS: ReadonlySet<string> = new Set<ChargeEvent['type']>([
  'ChargeRecorded.v1',
  'ChargeFiatBackfilled.v1',
  'ChargeSettlementReported.v1',
  'ChargeSettlementDelayed.v1',
  'ChargeSettled.v1',
  'ChargeSettlementFailed.v1',
  'ChargeLostToReorg.v1',
  'ChargeSettlementExposed.v1',
]);

/** The state after a charge stream's events (stored events: types this release does not know are skipped). */
export const foldCharge = (
  history: readonly { readonly type: string; readonly data: unknown }[],
): ChargeState =>
  history.reduce(
    (state, e) => (KNOWN_CHARGE_EVENTS.has(e.type) ? evolveCharge(state, e as ChargeEvent) : state),
    initialChargeState(),
  );

/** The plan's pricing and the business's settlement, as the API path knows them when it writes. */
export interface FiatContext {
  /** Fiat minor units when `priceCurrency` is set (a fiat-priced plan). */
  readonly price: string;
  readonly priceCurrency: string | null;
  readonly settlement: 'crypto' | 'fiat';
  /**
   * The fiat amount the charge's quote converted, in `priceCurrency` minor units (the subscription's charge fact
   * `quotedFiatAmount`); null or absent: the plan price (charges recorded before it existed, the subscribe call's).
   */
  readonly quotedFiatAmount?: string | null;
}

/**
 * SPEC fiat field rules 1-3: null on plans that are not fiat-priced, on failed charges and on charges the indexer
 * wrote; otherwise the plan's fixed fiat price, with settlement `pending` on a fiat-settling business and null on a
 * crypto-settled one (no payout behind it). A fiat-settling business's charge quoted at another fiat amount (an
 * ad-hoc `fiat_amount`) is paid out at that amount (`payoutFiatAmount`), while `fiat_amount` keeps SPEC's plan price.
 */
export function fiatFieldsFor(
  status: ChargeFacts['status'],
  writtenBy: LedgerWritePath,
  context: FiatContext | null,
): FiatFields | null {
  if (status !== 'succeeded' || writtenBy !== 'api' || !context || context.priceCurrency === null)
    return null;
  const quoted = context.quotedFiatAmount ?? null;
  const fiatSettled = context.settlement === 'fiat';
  return {
    fiatAmount: context.price,
    fiatCurrency: context.priceCurrency,
    settlementStatus: fiatSettled ? 'pending' : null,
    ...(fiatSettled && quoted !== null && quoted !== context.price ? { payoutFiatAmount: quoted } : {}),
  };
}

/**
 * The fiat amount a charge's settlement pays out: the quoted amount it recorded, else the plan price (rows recorded
 * before the quoted amount was kept, and charges quoted at the plan price).
 */
export const payoutFiatAmount = (fiat: FiatFields): string => fiat.payoutFiatAmount ?? fiat.fiatAmount;

export type ChargeCommand =
  | {
      readonly type: 'RecordCharge';
      readonly charge: ChargeFacts;
      readonly writtenBy: LedgerWritePath;
      /** What the API path knows of the plan; null from the indexer. */
      readonly fiatContext: FiatContext | null;
      readonly now: Date;
    }
  | { readonly type: 'RecordLostToReorg'; readonly txHash: string; readonly now: Date }
  | { readonly type: 'DelaySettlement'; readonly reason: SettlementFailureReason | null; readonly now: Date }
  | { readonly type: 'CompleteSettlement'; readonly now: Date }
  | { readonly type: 'FailSettlement'; readonly reason: ChargeSettlementFailureReason; readonly now: Date }
  | {
      readonly type: 'RecordSettlementReport';
      readonly reportId: string;
      readonly kind: SettlementReportKind;
      readonly reportedAt: Date;
      readonly now: Date;
    }
  | { readonly type: 'CheckSettlementDeadlines'; readonly now: Date }
  /** The subscription recorded that this charge paid a settlement address the merchant had replaced. */
  | { readonly type: 'RecordPaidReplacedSettlementAddress'; readonly now: Date };

const sameTx = (a: string | null, b: string | null) => (a ?? '').toLowerCase() === (b ?? '').toLowerCase();

export function decideCharge(command: ChargeCommand, state: ChargeState): ChargeEvent[] {
  const events = decideFacts(command, state);
  return [...events, ...exposureOf(events.reduce(evolveCharge, state), command.now)];
}

/**
 * The payout completed (before the reorg, or reported while the charge is lost) for a charge a reorg took: fiat went
 * out for crypto the chain no longer shows. Recorded once per loss, for the operator to recover. The completion itself
 * stays what SPEC says it is (settlement `completed`, subscription.charge_settled): the provider did pay the merchant.
 */
function exposureOf(state: ChargeState, now: Date): ChargeEvent[] {
  if (!state.lostToReorg || state.settlementStatus !== 'completed' || state.settlementExposure) return [];
  return [
    { type: 'ChargeSettlementExposed.v1', data: { reason: CHARGE_LOST_TO_REORG, at: now.toISOString() } },
  ];
}

function decideFacts(command: ChargeCommand, state: ChargeState): ChargeEvent[] {
  if (command.type === 'RecordCharge') return decideRecord(command, state);
  if (command.type === 'RecordSettlementReport') return decideSettlementReport(command, state);
  if (command.type === 'CheckSettlementDeadlines') return decideSettlementDeadlines(command.now, state);
  if (command.type === 'RecordPaidReplacedSettlementAddress')
    return decidePaidReplacedAddress(command.now, state);
  if (!state.recorded) throw notFound('subscription_charge');
  const at = command.now.toISOString();
  if (command.type === 'RecordLostToReorg') {
    // Only the transaction recorded; a retraction of an older one (already replaced) says nothing about this row.
    if (
      state.lostToReorg ||
      state.recorded.status !== 'succeeded' ||
      !sameTx(state.recorded.txHash, command.txHash)
    )
      return [];
    return [{ type: 'ChargeLostToReorg.v1', data: { txHash: command.txHash, lostAt: at } }];
  }
  const status = state.settlementStatus;
  if (status === null)
    throw conflict(
      'charge_not_fiat_settled',
      `Charge ${state.recorded.chargeId} has no fiat settlement (crypto-settled, not fiat-priced, or failed).`,
    );
  const open = status === 'pending' || status === 'delayed';
  switch (command.type) {
    case 'DelaySettlement':
      // Non-terminal, once per distinct reason; a late delay after the end is stale and says nothing new.
      if (!open || state.delayReasons.includes(command.reason)) return [];
      return [{ type: 'ChargeSettlementDelayed.v1', data: { reason: command.reason, delayedAt: at } }];
    case 'CompleteSettlement':
      if (status === 'completed') return [];
      if (!open) throw settlementFinal(state.recorded.chargeId, status);
      return [{ type: 'ChargeSettled.v1', data: { settledAt: at } }];
    case 'FailSettlement':
      if (status === 'failed') return [];
      if (!open) throw settlementFinal(state.recorded.chargeId, status);
      return [{ type: 'ChargeSettlementFailed.v1', data: { reason: command.reason, failedAt: at } }];
  }
}

/** SPEC's deadlines count from the time the crypto settled: the charge's block time. */
export {
  BANK_TRANSFER_DEADLINE_MS,
  SELL_ORDER_FAILURES_ALLOWED,
  SETTLEMENT_DEADLINE_MS,
  SETTLEMENT_DELAY_AFTER_MS,
} from '@stablepay/fiat-settlement';

/** The charge's settlement as the shared process sees it (null: no fiat settlement, or nothing recorded). */
function fiatSettlementOf(state: ChargeState): FiatSettlement | null {
  if (!state.recorded || state.settlementStatus === null) return null;
  return {
    status: state.settlementStatus,
    startedAt: state.recorded.chargedAt,
    delayReasons: state.delayReasons,
    provider: state.provider,
  };
}

function outcomeEvent(outcome: SettlementOutcome, at: string): ChargeEvent {
  switch (outcome.kind) {
    case 'delayed':
      return { type: 'ChargeSettlementDelayed.v1', data: { reason: outcome.reason, delayedAt: at } };
    case 'completed':
      return { type: 'ChargeSettled.v1', data: { settledAt: at } };
    case 'failed':
      return { type: 'ChargeSettlementFailed.v1', data: { reason: outcome.reason, failedAt: at } };
  }
}

/**
 * A settlement provider report: recorded once (by report id), then what it means for the merchant, as the shared
 * process decides it (settlementReportOutcomes). Reports after the end are kept, nothing follows.
 */
function decideSettlementReport(
  command: Extract<ChargeCommand, { type: 'RecordSettlementReport' }>,
  state: ChargeState,
): ChargeEvent[] {
  if (!state.recorded) throw notFound('subscription_charge');
  if (state.settlementStatus === null)
    throw conflict(
      'charge_not_fiat_settled',
      `Charge ${state.recorded.chargeId} has no fiat settlement (crypto-settled, not fiat-priced, or failed).`,
    );
  if (state.provider.reportIds.includes(command.reportId)) return [];
  const at = command.now.toISOString();
  const report: ChargeEvent = {
    type: 'ChargeSettlementReported.v1',
    data: {
      reportId: command.reportId,
      kind: command.kind,
      reportedAt: command.reportedAt.toISOString(),
      receivedAt: at,
    },
  };
  const after = fiatSettlementOf(evolveCharge(state, report));
  const outcomes = after ? settlementReportOutcomes(after, command.kind, command.now) : [];
  return [report, ...outcomes.map((o) => outcomeEvent(o, at))];
}

/**
 * The settlement that runs on its own (deadlines, the sandbox payout): none while a reorg has taken the charge out.
 * The crypto a fiat payout converts never reached the off-ramp on the chain as it now stands, so no deadline turns
 * it delayed or failed and the sandbox pays nothing out for it; a re-included charge picks it up again. A provider's
 * own report is still recorded and acted on (it says what the provider did).
 */
function runningSettlementOf(state: ChargeState): FiatSettlement | null {
  return state.lostToReorg ? null : fiatSettlementOf(state);
}

/** SPEC's deadlines at `now` (settlementDeadlineOutcomes). */
function decideSettlementDeadlines(now: Date, state: ChargeState): ChargeEvent[] {
  const settlement = runningSettlementOf(state);
  if (!settlement) return [];
  return settlementDeadlineOutcomes(settlement, now).map((o) => outcomeEvent(o, now.toISOString()));
}

/**
 * The charge paid a settlement address the merchant had replaced: the off-ramp credits the address the settings hold,
 * so an open fiat settlement fails at once (`settlement_address_replaced`) rather than at SPEC's 72-hour deadline as
 * `deposit_not_credited`. A charge with no fiat settlement (crypto-settled, not fiat-priced, a row the indexer wrote
 * whose fiat fields are not backfilled yet) or one already ended records nothing: the caller checks again after a
 * backfill.
 */
function decidePaidReplacedAddress(now: Date, state: ChargeState): ChargeEvent[] {
  const settlement = fiatSettlementOf(state);
  if (!settlement || !isSettlementOpen(settlement)) return [];
  return [
    {
      type: 'ChargeSettlementFailed.v1',
      data: { reason: SETTLEMENT_ADDRESS_REPLACED, failedAt: now.toISOString() },
    },
  ];
}

/** When the deadlines must next be checked (the durable timer's due time; null: the settlement is not open). */
export function settlementCheckAt(state: ChargeState): Date | null {
  const settlement = runningSettlementOf(state);
  return settlement ? settlementDeadlineAt(settlement) : null;
}

const settlementFinal = (chargeId: string, status: SettlementStatus) =>
  conflict('settlement_final', `The settlement of charge ${chargeId} is already ${status}.`);

/**
 * First writer records the row; the second merges: the same facts record nothing, the subscribe call's fiat fields are
 * backfilled onto a first charge (nonce 0) the indexer wrote first (rule 3), and nothing else is backfilled (rule 4:
 * a charge call may leave its row to the indexer, which writes no fiat fields; reconcile on the fields being present).
 */
function decideRecord(
  command: Extract<ChargeCommand, { type: 'RecordCharge' }>,
  state: ChargeState,
): ChargeEvent[] {
  const { charge, writtenBy } = command;
  const at = command.now.toISOString();
  const fiat = fiatFieldsFor(charge.status, writtenBy, command.fiatContext);
  const existing = state.recorded;
  if (!existing || (state.lostToReorg && charge.status === 'succeeded'))
    return [{ type: 'ChargeRecorded.v1', data: { ...charge, fiat, writtenBy, recordedAt: at } }];
  if (!sameTx(existing.txHash, charge.txHash) || existing.status !== charge.status)
    throw conflict(
      'charge_conflict',
      `Charge ${charge.chargeId} is recorded as ${existing.status} in ${existing.txHash ?? 'no transaction'}, not ${charge.status} in ${charge.txHash ?? 'no transaction'}.`,
    );
  if (state.fiat === null && fiat !== null && existing.nonce === 0)
    return [{ type: 'ChargeFiatBackfilled.v1', data: { fiat, backfilledAt: at } }];
  return [];
}

/** SPEC Resources > Subscription charge: the API object and `data.charge` of the charge webhooks. */
export interface SubscriptionChargeObject {
  readonly object: 'subscription_charge';
  readonly id: string;
  readonly subscription_id: string;
  readonly subscriber: string;
  readonly amount: string;
  readonly fee: string;
  readonly tx_hash: string | null;
  readonly chain: string;
  readonly charge_nonce: number;
  readonly charged_at: string;
  readonly block_number: string;
  readonly created_at: string;
  readonly status: 'succeeded' | 'failed';
  readonly failure_reason: string | null;
  readonly fiat_amount: string | null;
  readonly fiat_currency: string | null;
  readonly settlement_status: SettlementStatus | null;
  /**
   * Ours (additive): the fiat payout stands for a charge a reorg took; null otherwise and again once re-included.
   * `amount` in `currency` is what the payout paid out (payoutFiatAmount), minor units.
   */
  readonly settlement_exposure: ChargeSettlementExposure | null;
}

export interface ChargeSettlementExposure {
  readonly reason: typeof CHARGE_LOST_TO_REORG;
  readonly amount: string;
  readonly currency: string;
  readonly recorded_at: string;
}

export function chargeObject(state: ChargeState): SubscriptionChargeObject {
  const r = state.recorded;
  if (!r) throw notFound('subscription_charge');
  const failed = r.status === 'failed' || state.lostToReorg;
  return {
    object: 'subscription_charge',
    id: r.chargeId,
    subscription_id: r.subscriptionId,
    subscriber: r.subscriber,
    amount: r.amount,
    fee: failed ? '0' : r.fee,
    tx_hash: r.txHash,
    chain: r.chain,
    charge_nonce: r.nonce,
    charged_at: r.chargedAt,
    block_number: failed ? '0' : r.blockNumber,
    created_at: r.recordedAt,
    status: failed ? 'failed' : 'succeeded',
    failure_reason: state.lostToReorg ? CHARGE_LOST_TO_REORG : failed ? r.failureReason : null,
    fiat_amount: state.fiat?.fiatAmount ?? null,
    fiat_currency: state.fiat?.fiatCurrency ?? null,
    settlement_status: state.settlementStatus,
    settlement_exposure:
      state.settlementExposure && state.fiat
        ? {
            reason: state.settlementExposure.reason,
            amount: payoutFiatAmount(state.fiat),
            currency: state.fiat.fiatCurrency,
            recorded_at: state.settlementExposure.at,
          }
        : null,
  };
}

/**
 * SPEC Events: the settlement summary, `data.object` of subscription.charge_settled, charge_settlement_delayed and
 * charge_settlement_failed. `settlement_failure_reason` always on failed, on delayed only when known. Its
 * `fiat_amount` is the payout's (payoutFiatAmount): on an ad-hoc charge the amount quoted, not the plan price that
 * the charge object's `fiat_amount` keeps (SPEC Resources > Subscription charge).
 */
export interface SettlementSummary {
  readonly subscription_id: string;
  readonly charge_nonce: number;
  readonly amount: string;
  readonly fiat_amount: string;
  readonly fiat_currency: string;
  readonly settlement_status: 'delayed' | 'completed' | 'failed';
  readonly settlement_failure_reason?: ChargeSettlementFailureReason;
}

/** The summary as of a settlement event (the state folded up to and including it). */
export function settlementSummary(state: ChargeState): SettlementSummary {
  const r = state.recorded;
  const status = state.settlementStatus;
  if (!r || !state.fiat || (status !== 'delayed' && status !== 'completed' && status !== 'failed'))
    throw new RangeError('a settlement summary needs a fiat-settled charge after a settlement event');
  const reason = status === 'completed' ? null : state.settlementFailureReason;
  return {
    subscription_id: r.subscriptionId,
    charge_nonce: r.nonce,
    amount: r.amount,
    fiat_amount: payoutFiatAmount(state.fiat),
    fiat_currency: state.fiat.fiatCurrency,
    settlement_status: status,
    ...(reason ? { settlement_failure_reason: reason } : {}),
  };
}
