import { type ErrorType } from '@stablepay/util';
import { budgetWindow, shownStatus, type SubscriptionState } from './subscription';
import type { PauserRole } from './subscription-manager';

/**
 * SPEC Errors > charge preflight and Subscriptions > Charge behavior rule 2: the checks `POST /subscriptions/:id/charge`
 * runs before anything is submitted. Pure: it reads the subscription state, the chain time, the request, the quote the
 * service resolved and the signature check the service ran, and answers. A rejection has no side effect (SPEC fiat field
 * rule 7: never persisted as a charge, no transaction, no event).
 *
 * Order: the contract's own (NonceAlreadyUsed first, then status, deadline, nonce ahead, signature, zero, cap, budget)
 * with our checks slotted where a merchant would fix them. Statuses (SPEC: "not shown"; ours, also in
 * docs/subscriptions.md):
 *
 * | code                           | status | type            | when                                                                      |
 * |--------------------------------|--------|-----------------|---------------------------------------------------------------------------|
 * | nonce_already_used             | 409    | invalid_request | the nonce charged already, for another amount or quote                    |
 * | charge_pending                 | 409    | invalid_request | the nonce has a broadcast charge of ours awaiting its receipt, other terms |
 * | subscription_cancelled         | 409    | invalid_request | status cancelling or cancelled: no further charges eligible               |
 * | subscription_flagged           | 422    | cannot_process  | compliance flag (ours: SPEC lists no code; an auditor expects no charge)   |
 * | manager_paused                 | 409    | invalid_request | the merchant's manager is paused by a pauser (ManagerPaused on chain)     |
 * | missing_budget_state           | 409    | invalid_request | the first charge's window state is not recorded yet; retry shortly        |
 * | signature_expired              | 422    | cannot_process  | deadline before chain time (SignatureExpired)                             |
 * | signature_deadline_too_far     | 422    | cannot_process  | deadline more than 7 days after chain time (DeadlineTooFar)               |
 * | nonce_mismatch                 | 409    | invalid_request | nonce ahead of charge_nonce (InvalidNonce)                                |
 * | invalid_signature              | 422    | cannot_process  | not the merchant signer at the current epoch, or not over these terms     |
 * | invalid_amount                 | 400    | validation_error| zero (ZeroAmount)                                                         |
 * | quote_required                 | 400    | validation_error| fiat-priced plan without a quote code                                    |
 * | quote_not_found                | 404    | invalid_request | unknown code, or a code of another merchant                               |
 * | quote_subscription_mismatch    | 422    | cannot_process  | the quote was issued for another subscription                             |
 * | quote_amount_mismatch          | 422    | cannot_process  | the charged amount differs from the quoted token amount                   |
 * | quote_hash_mismatch            | 422    | cannot_process  | the signature's quoteHash is not this quote's                             |
 * | quote_expired                  | 422    | cannot_process  | reference quote past its 120 s, price lock past its expiry                |
 * | quote_already_used             | 409    | invalid_request | the quote paid another charge already                                    |
 * | fiat_settlement_required       | 422    | cannot_process  | a price lock, and the business no longer has a complete fiat configuration |
 * | currency_mismatch              | 422    | cannot_process  | a price lock in another currency than the business now pays out in, or    |
 * |                                |        |                 | any price lock on a token-priced plan (its charges settle no fiat)        |
 * | amount_exceeds_cap             | 422    | cannot_process  | amount > cap_amount (cap and budget rule 1)                               |
 * | budget_exceeded                | 422    | cannot_process  | spent_this_period + amount > budget (rule 2)                              |
 *
 * 409 says "the state moved: re-read and retry"; 422 "these terms can never pass as they are"; 400 a bad field.
 * A used nonce whose recorded charge has this amount and quote is not an error: `already_charged` answers with that
 * charge, so a merchant retry of a charge that landed (ours or someone else's submission) never charges twice.
 */
export type ChargePreflightCode =
  | 'nonce_already_used'
  | 'charge_pending'
  | 'subscription_cancelled'
  | 'subscription_flagged'
  | 'manager_paused'
  | 'missing_budget_state'
  | 'signature_expired'
  | 'signature_deadline_too_far'
  | 'nonce_mismatch'
  | 'invalid_signature'
  | 'invalid_amount'
  | 'quote_required'
  | 'quote_not_found'
  | 'quote_subscription_mismatch'
  | 'quote_amount_mismatch'
  | 'quote_hash_mismatch'
  | 'quote_expired'
  | 'quote_already_used'
  | 'fiat_settlement_required'
  | 'currency_mismatch'
  | 'amount_exceeds_cap'
  | 'budget_exceeded';

export const CHARGE_PREFLIGHT_ERRORS: Readonly<
  Record<ChargePreflightCode, { readonly status: number; readonly type: ErrorType; readonly param?: string }>
> = {
  nonce_already_used: { status: 409, type: 'invalid_request', param: 'nonce' },
  charge_pending: { status: 409, type: 'invalid_request', param: 'nonce' },
  subscription_cancelled: { status: 409, type: 'invalid_request' },
  subscription_flagged: { status: 422, type: 'cannot_process' },
  manager_paused: { status: 409, type: 'invalid_request' },
  missing_budget_state: { status: 409, type: 'invalid_request' },
  signature_expired: { status: 422, type: 'cannot_process', param: 'deadline' },
  signature_deadline_too_far: { status: 422, type: 'cannot_process', param: 'deadline' },
  nonce_mismatch: { status: 409, type: 'invalid_request', param: 'nonce' },
  invalid_signature: { status: 422, type: 'cannot_process', param: 'signature' },
  invalid_amount: { status: 400, type: 'validation_error', param: 'amount' },
  quote_required: { status: 400, type: 'validation_error', param: 'quote_code' },
  quote_not_found: { status: 404, type: 'invalid_request', param: 'quote_code' },
  quote_subscription_mismatch: { status: 422, type: 'cannot_process', param: 'quote_code' },
  quote_amount_mismatch: { status: 422, type: 'cannot_process', param: 'amount' },
  quote_hash_mismatch: { status: 422, type: 'cannot_process', param: 'signature' },
  quote_expired: { status: 422, type: 'cannot_process', param: 'quote_code' },
  quote_already_used: { status: 409, type: 'invalid_request', param: 'quote_code' },
  fiat_settlement_required: { status: 422, type: 'cannot_process', param: 'quote_code' },
  currency_mismatch: { status: 422, type: 'cannot_process', param: 'quote_code' },
  amount_exceeds_cap: { status: 422, type: 'cannot_process', param: 'amount' },
  budget_exceeded: { status: 422, type: 'cannot_process', param: 'amount' },
};

/** SPEC Subscriptions > Quote behavior: a reference quote proves the amount shown for 120 seconds. */
export const REFERENCE_QUOTE_TTL_SECONDS = 120;
/** SubscriptionManager's MAX_SIGNATURE_HORIZON: merchant signature deadlines at most 7 days ahead of chain time. */
export const MAX_SIGNATURE_HORIZON_SECONDS = 7n * 24n * 3600n;
export const ZERO_QUOTE_HASH = `0x${'0'.repeat(64)}`;

/** A quote the service issued, as its store resolved the request's code (within the merchant's scope). */
export interface ChargeQuote {
  /** `refq_...` for a reference quote (crypto-settled), the provider's `price_lock_code` for a price lock. */
  readonly code: string;
  readonly kind: 'reference' | 'price_lock';
  readonly subscriptionId: string;
  /** Token smallest units the quote converted to. */
  readonly tokenAmount: bigint;
  /** The bytes32 the merchant signs as quoteHash (and SubscriptionCharged echoes). */
  readonly quoteHash: string;
  /** Service time; a reference quote's is its issue time + 120 s. */
  readonly expiresAt: Date;
  /**
   * The charge the quote already paid, as the quote store recorded it (written after the charge's receipt; the
   * subscription's own stream, which records the receipt first, is checked as well).
   */
  readonly usedByChargeId: string | null;
  /** The fiat currency the quote converted from (a price lock's payout currency); null when a token price was quoted. */
  readonly fiatCurrency: string | null;
  /** The fiat minor units the quote converted (the plan price or an ad-hoc `fiat_amount`); null with fiatCurrency. */
  readonly fiatAmount: string | null;
}

/** The business's settlement as its settings hold it now (not as they were when a quote was issued). */
export type CurrentSettlement =
  | { readonly mode: 'crypto' }
  | { readonly mode: 'fiat'; readonly currency: string | null; readonly complete: boolean };

/**
 * SPEC Rules 8 where money is committed: a fiat payout in `currency` needs a complete fiat settlement configuration
 * paying out in that currency. The refusal's code and the start of its message, or null when the payout can be made.
 */
export function fiatPayoutRefusal(
  settlement: CurrentSettlement,
  currency: string,
): { readonly code: 'fiat_settlement_required' | 'currency_mismatch'; readonly message: string } | null {
  if (settlement.mode === 'crypto')
    return {
      code: 'fiat_settlement_required',
      message: 'This business now settles in crypto, so there is no fiat payout to make',
    };
  if (!settlement.complete || settlement.currency === null)
    return {
      code: 'fiat_settlement_required',
      message:
        'This business settles in fiat and has no complete fiat settlement configuration, so there is nothing to pay out to',
    };
  if (currency !== settlement.currency)
    return {
      code: 'currency_mismatch',
      message: `This business now settles in ${settlement.currency}, and this price is in ${currency}`,
    };
  return null;
}

export interface ChargeRequest {
  readonly subscriptionId: string;
  readonly amount: bigint;
  readonly nonce: number;
  /** Unix seconds, as signed. */
  readonly deadline: bigint;
  readonly quoteHash: string;
  /** The code sent in the body; null when none was sent. */
  readonly quoteCode: string | null;
}

export interface ChargePreflightInput {
  readonly state: SubscriptionState;
  readonly request: ChargeRequest;
  /** The quote `request.quoteCode` resolved to (null: none sent, or unknown). */
  readonly quote: ChargeQuote | null;
  /**
   * The service's EIP-712 check: the recovered signer is the merchant's registered signer and the signed epoch its
   * current one (an epoch bump voids every earlier signature).
   */
  readonly signatureValid: boolean;
  /** Latest block time, unix seconds: windows and deadlines are chain time. */
  readonly chainNow: bigint;
  /** The pausers whose flag is on at the merchant's manager (SubscriptionManager aggregate); none when absent. */
  readonly managerPausedBy?: readonly PauserRole[];
  /** Service time: quote expiry. */
  readonly now: Date;
  /**
   * The merchant's settlement as its settings hold it now: a price lock is redeemed into the fiat payout the
   * configuration makes at charge time, which may have changed since the lock was issued.
   */
  readonly settlement: CurrentSettlement;
}

export type ChargePreflightResult =
  | { readonly outcome: 'ok' }
  | { readonly outcome: 'already_charged'; readonly chargeId: string; readonly txHash: string }
  /** The same charge was broadcast and awaits its receipt: wait for that transaction, never send another. */
  | { readonly outcome: 'pending'; readonly txHash: string }
  | {
      readonly outcome: 'rejected';
      readonly code: ChargePreflightCode;
      readonly status: number;
      readonly type: ErrorType;
      readonly param?: string;
      readonly message: string;
    };

const reject = (code: ChargePreflightCode, message: string): ChargePreflightResult => ({
  outcome: 'rejected',
  code,
  ...CHARGE_PREFLIGHT_ERRORS[code],
  message,
});

export function chargePreflight(input: ChargePreflightInput): ChargePreflightResult {
  const { state, request } = input;
  const created = state.created;
  if (!created || created.subscriptionId.toLowerCase() !== request.subscriptionId.toLowerCase())
    throw new RangeError('chargePreflight needs the state of the requested subscription');

  // NonceAlreadyUsed comes first on chain, even when cancelled: a retry of a landed charge is answered, not refused.
  const landed = state.chargesByNonce.get(request.nonce);
  if (landed) {
    if (
      landed.amount === request.amount &&
      landed.quoteHash.toLowerCase() === request.quoteHash.toLowerCase()
    )
      return { outcome: 'already_charged', chargeId: landed.chargeId, txHash: landed.txHash };
    return reject(
      'nonce_already_used',
      `Nonce ${request.nonce} already charged ${landed.amount} (charge ${landed.chargeId}); the next nonce is ${state.nextNonce}.`,
    );
  }
  // Our earlier broadcast of this nonce awaits its receipt (docs/subscriptions.md, Charge receipt timeout): the same
  // charge resumes waiting for it (its quote and signature were checked when it was sent); other terms are refused.
  const pending = state.pendingCharges.get(request.nonce);
  if (pending) {
    if (
      pending.amount === request.amount &&
      pending.quoteHash.toLowerCase() === request.quoteHash.toLowerCase()
    )
      return { outcome: 'pending', txHash: pending.txHash };
    return reject(
      'charge_pending',
      `Nonce ${request.nonce} has charge transaction ${pending.txHash} of ${pending.amount} awaiting its receipt.`,
    );
  }
  if (shownStatus(state) !== 'active')
    return reject(
      'subscription_cancelled',
      `Subscription ${created.subscriptionId} is ${shownStatus(state)}.`,
    );
  if (state.flagged)
    return reject(
      'subscription_flagged',
      `Subscription ${created.subscriptionId} is flagged by compliance screening.`,
    );
  // ManagerPaused comes right after NonceAlreadyUsed on chain; a charge sent now would only fail in simulation.
  const pausers = input.managerPausedBy ?? [];
  if (pausers.length > 0)
    return reject(
      'manager_paused',
      `The subscription manager is paused by the ${pausers.join(' and ')} pauser; charges resume once it is unpaused.`,
    );
  if (state.nextNonce === 0)
    return reject(
      'missing_budget_state',
      `The first charge of subscription ${created.subscriptionId} is not recorded yet, so its budget window is unknown; retry shortly.`,
    );
  if (request.deadline < input.chainNow)
    return reject('signature_expired', 'The signature deadline has passed (chain time).');
  if (request.deadline > input.chainNow + MAX_SIGNATURE_HORIZON_SECONDS)
    return reject('signature_deadline_too_far', 'The signature deadline lies more than 7 days ahead.');
  if (request.nonce !== state.nextNonce)
    return reject('nonce_mismatch', `The next charge_nonce is ${state.nextNonce}, not ${request.nonce}.`);
  if (!input.signatureValid)
    return reject(
      'invalid_signature',
      "The signature is not the merchant signer's over this charge at the merchant's current epoch.",
    );
  if (request.amount <= 0n) return reject('invalid_amount', 'amount must be positive.');

  const quoteRejection = checkQuote(input, created.priceCurrency !== null);
  if (quoteRejection) return quoteRejection;

  // SPEC cap and budget rule 1.
  if (request.amount > state.cap)
    return reject('amount_exceeds_cap', `amount ${request.amount} exceeds cap_amount ${state.cap}.`);
  // Rule 2, in the window anchored at the on-chain start (rule 3), at chain time.
  const window = budgetWindow(state, input.chainNow);
  if (request.amount > window.remainingBudget)
    return reject(
      'budget_exceeded',
      `amount ${request.amount} exceeds remaining_budget ${window.remainingBudget} of the current window (spent_this_period ${window.spentThisPeriod} of budget ${state.budget}).`,
    );
  return { outcome: 'ok' };
}

/** The quote binding errors: a quote proves this amount, for this subscription, once, in time, under this signature. */
function checkQuote(input: ChargePreflightInput, fiatPriced: boolean): ChargePreflightResult | null {
  const { request, quote, state } = input;
  if (request.quoteCode === null) {
    if (fiatPriced)
      return reject(
        'quote_required',
        'A fiat-priced plan charges with the quote_code of POST /subscriptions/:id/charge-quote.',
      );
    if (request.quoteHash.toLowerCase() !== ZERO_QUOTE_HASH)
      return reject('quote_hash_mismatch', 'The signature names a quote but no quote_code was sent.');
    return null;
  }
  if (!quote || quote.code !== request.quoteCode)
    return reject('quote_not_found', `No such quote: '${request.quoteCode}'.`);
  if (quote.subscriptionId.toLowerCase() !== request.subscriptionId.toLowerCase())
    return reject('quote_subscription_mismatch', `Quote ${quote.code} was issued for another subscription.`);
  if (quote.tokenAmount !== request.amount)
    return reject(
      'quote_amount_mismatch',
      `Quote ${quote.code} is for amount ${quote.tokenAmount}, not ${request.amount}.`,
    );
  if (quote.quoteHash.toLowerCase() !== request.quoteHash.toLowerCase())
    return reject('quote_hash_mismatch', `The signature's quoteHash is not quote ${quote.code}'s.`);
  // The quote store's record of the use is written after the receipt is appended (the answer does not wait for
  // it), so a charge of this subscription that carries the quote's hash proves the use as well.
  const paidBy =
    quote.usedByChargeId ??
    [...state.chargesByNonce.values()].find(
      (c) => c.quoteHash.toLowerCase() === quote.quoteHash.toLowerCase(),
    )?.chargeId;
  if (paidBy !== undefined)
    return reject('quote_already_used', `Quote ${quote.code} already paid charge ${paidBy}.`);
  if (input.now.getTime() >= quote.expiresAt.getTime())
    return reject('quote_expired', `Quote ${quote.code} expired at ${quote.expiresAt.toISOString()}.`);
  // The quote and subscribe calls refuse a lock the configuration cannot pay out (SPEC Rules 8); a lock issued before
  // PUT /payments/settlement removed the configuration or moved its currency is refused here on the same terms, or
  // its charge would be tracked `pending` towards a payout that is never made (or made in another currency).
  if (quote.kind === 'price_lock') {
    // The quote call refuses a lock for a token-priced plan (requireFiatPricedForPriceLock): its charges carry no fiat
    // fields, so the payout the lock promises would never be tracked, paid or announced. A lock taken before that
    // refusal (or by an older replica during a rollout) is refused here on the same terms.
    if (!fiatPriced)
      return reject(
        'currency_mismatch',
        `The plan is priced in token units, not in the business's settlement currency: its charges are not settled in fiat, so price lock ${quote.code} (${quote.fiatCurrency ?? 'no currency'}) cannot be redeemed; charge the token amount without a quote_code, or with a new quote.`,
      );
    const refusal = fiatPayoutRefusal(input.settlement, quote.fiatCurrency ?? '');
    if (refusal)
      return reject(
        refusal.code,
        `${refusal.message}: price lock ${quote.code} (${quote.fiatCurrency ?? 'no currency'}) cannot be redeemed into the payout the settlement configuration now makes; take a new quote.`,
      );
  }
  return null;
}
