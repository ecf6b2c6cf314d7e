import type {
  DeployHoldReason,
  NonFundingReason,
  RecoverableReason,
  SettlementFailureReason,
  SettlementStatus,
} from './payment.events';
import { formatTokenAmount } from './rules';
import {
  type PaymentState,
  type PaymentStatus,
  amountPaid,
  checkoutStatus,
  detectedAsset,
  fundingStatus,
  payerOf,
  paymentStatus,
} from './payment';

/** SPEC Resources > Payment object: one `transactions[]` entry. */
export interface PaymentTransaction {
  readonly tx_hash: string;
  readonly log_index: number;
  readonly from: string;
  /**
   * Ours: the tokens were minted straight to the deposit address (a bridge such as CCTP, an issuer's mint); `from` is
   * then the minting transaction's sender, which need not be the payer (a bridge's relayer).
   */
  readonly minted: boolean;
  readonly amount: string;
  readonly asset: string;
  readonly token_symbol: string | null;
  readonly chain: string;
  readonly block_number: string;
  readonly is_funding: boolean;
  /**
   * Ours: why it does not fund (wrong_token, wrong_chain, duplicate, straggler, or `sanctioned`: its sender was
   * screened as a sanctions match and is not the payer, so the funds are held in the deposit address for good);
   * null when funding.
   */
  readonly non_funding_reason: NonFundingReason | 'sanctioned' | null;
  /** Ours: reached the chain's required confirmations. */
  readonly confirmed: boolean;
}

/** Ours: an amount of one token, smallest units. */
export interface PaymentAssetAmount {
  readonly asset: string;
  readonly amount: string;
}

const assetAmounts = (sums: Readonly<Record<string, bigint>>): PaymentAssetAmount[] =>
  Object.entries(sums).map(([asset, amount]) => ({ asset, amount: amount.toString() }));

/** SPEC Resources > Payment object (the body of `data.object` of every payment event). */
export interface PaymentObject {
  readonly id: string;
  readonly object: 'payment';
  readonly checkout_id: string;
  readonly status: PaymentStatus;
  readonly method: 'DIRECT' | 'TWO_STEP';
  readonly amount: string;
  readonly amount_paid: string;
  readonly currency: string;
  readonly detected_asset: string | null;
  readonly detected_token_symbol: string | null;
  readonly detected_chain: string | null;
  readonly token_amount: string | null;
  readonly token_amount_decimal: string | null;
  readonly on_chain_id: string;
  readonly deposit_address: string;
  readonly deploy_tx_hash: string | null;
  /**
   * Ours: why the deposit's deploy is held (the funds wait in the deposit address): `merchant_change_pending`
   * (the registry holds another signer or settlement address than the settings: POST /settings/merchant-change),
   * `merchant_not_registered` (the operator has not registered the merchant on that chain yet),
   * `chain_mode_mismatch` (a payment of the other mode than the deployment's chains). Null otherwise.
   */
  readonly deploy_hold_reason: DeployHoldReason | null;
  readonly payer_addresses: readonly string[];
  /**
   * Ours: where the deposit's payer stands (the refund, reclaim and recover destination, `payer_addresses[0]`):
   * `attested` (by the deploy, or by the operator after a dispute; final at `payer_final_at`), `dispute_pending`
   * (the merchant's dispute is relayed and its log not yet seen at the indexer's depth: the payer still stands),
   * `disputed` (no payer until the operator attests one; refund and recover are refused), null before the deploy.
   * Absent on a stored row until its next event.
   */
  readonly payer_status?: 'attested' | 'dispute_pending' | 'disputed' | null;
  /** Ours: when the attested payer becomes final on chain (its challenge period ends); null when none is attested. */
  readonly payer_final_at?: string | null;
  readonly transactions: readonly PaymentTransaction[];
  readonly non_funding_transactions_count: number;
  /** Ours, TWO_STEP: smallest units captured to the settlement address / returned to the payer so far. */
  readonly amount_captured: string;
  readonly amount_refunded: string;
  /** Ours, TWO_STEP: capture is refused from this time on; the payer can reclaim. */
  readonly authorization_expires_at: string | null;
  readonly expires_at: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly failure_reason?: string;
  readonly failure_message?: string;
  readonly recoverable_reason?: RecoverableReason;
  /** Null while the payer is unknown (minted funds, before the deploy attests the settlement address). */
  readonly recovery_destination?: string | null;
  readonly recoverable_amount?: string;
  /**
   * Ours, beside `recoverable_amount` (its unit): the token (CAIP-19) and chain (CAIP-2) of the funds a recover
   * returns. An abandoned deposit that nothing funded in time has no `detected_asset` / `detected_chain` (SPEC: the
   * token the customer paid with), so without these the amount named no token.
   */
  readonly recoverable_asset?: string;
  readonly recoverable_chain?: string;
  /**
   * Ours: when the merchant's recover asked for the deposit to be deployed for funds below the dust share (answered
   * 202); the recover itself follows once `deploy_tx_hash` is set and the payer is final. Absent without such a
   * request.
   */
  readonly recovery_requested_at?: string;
  /**
   * Ours: what `recover` returned to the payer and `rescue` moved out so far, per token (CAIP-19 as the outflow named
   * it, smallest units), oldest token first; empty when none. The recoverable fields go once recovered, so without
   * these a later transfer's inflow and its return left no trace on the payment. Absent on a stored row until its
   * next event.
   */
  readonly recovered_amounts?: ReadonlyArray<PaymentAssetAmount>;
  readonly rescued_amounts?: ReadonlyArray<PaymentAssetAmount>;
  readonly settlement_failure_reason?: SettlementFailureReason;
  /**
   * Ours (SPEC's payment fields name none; the charge's values): a fiat-settled business's payout of this payment,
   * `pending` from the settle until `completed` or `failed` (`delayed` while late); null on a crypto-settled business
   * and before the payment settled.
   */
  readonly settlement_status: SettlementStatus | null;
  /**
   * Ours: set while the provider's fiat payout of this payment stands for a deposit a reorg took (status `failed`,
   * failure_reason `deposit_lost_to_reorg`): `amount` in `currency` was paid out for crypto we no longer hold, to be
   * recovered from the merchant's next settlements; null otherwise (null again once the payment is reinstated). Absent
   * on a stored row until its next event.
   */
  readonly settlement_exposure?: SettlementExposureObject | null;
  readonly created_at: string;
  readonly updated_at: string;
}

/**
 * Ours: what a payout made for a deposit a reorg took exposes. The payout is made for the order (the settlement
 * opens for it and the provider's reports carry no amount), so the amount is the order's: the payment's `amount`
 * (6-decimal integer string) in its `currency`.
 */
export interface SettlementExposureObject {
  readonly reason: 'deposit_lost_to_reorg';
  readonly amount: string;
  readonly currency: string;
  readonly recorded_at: string;
}

/**
 * Ours: `data.transfer` of `payment.recovered` and `payment.rescued`, the funds that left the deposit (the recover
 * or rescue transaction as the PaymentDeposit log reported it).
 */
export interface PaymentOutgoingTransfer {
  readonly tx_hash: string;
  /** CAIP-19 of the token moved (as the rescue named it: `native` for the chain's coin). */
  readonly asset: string;
  /** The payment's own symbol for an accepted token; null for another token. */
  readonly token_symbol: string | null;
  /** CAIP-2 of the deposit's chain. */
  readonly chain: string;
  /** Token smallest unit. */
  readonly amount: string;
  /** Recipient: the attested payer (recover) or the destination the merchant signed (rescue). */
  readonly to: string;
}

/** The recover or rescue `outflow` as `data.transfer` shows it. */
export function toOutgoingTransfer(
  state: PaymentState,
  outflow: { readonly txHash: string; readonly asset: string; readonly amount: string; readonly to: string },
): PaymentOutgoingTransfer {
  return {
    tx_hash: outflow.txHash,
    asset: outflow.asset,
    token_symbol: state.created?.acceptedAssets.find((a) => a.asset === outflow.asset)?.symbol ?? null,
    chain: state.deployment?.chain ?? chainOfAsset(state, outflow.asset),
    amount: outflow.amount,
    to: outflow.to,
  };
}

/** The chain the deposit received `asset` on (a CAIP-19 id starts with its CAIP-2 chain). */
const chainOfAsset = (state: PaymentState, asset: string): string =>
  state.transfers.find((t) => t.asset === asset)?.chain ?? asset.slice(0, asset.indexOf('/'));

/** The payment object as a pure function of the aggregate's state. */
/**
 * `dispute_pending` from our relay of the merchant's dispute until the deposit's log is seen at the indexer's depth
 * (or the relay failed): the payer named still stands on chain until then.
 */
function payerStatus(state: PaymentState): PaymentObject['payer_status'] {
  if (!state.deployment) return null;
  if (state.deployment.payer === null) return 'disputed';
  return state.payerDisputeRequest ? 'dispute_pending' : 'attested';
}

export function toPaymentObject(state: PaymentState): PaymentObject {
  const created = state.created;
  if (!created) throw new Error('toPaymentObject: the payment was never created');
  const detected = detectedAsset(state);
  const symbolOf = (asset: string) => created.acceptedAssets.find((a) => a.asset === asset)?.symbol ?? null;
  const transactions = state.transfers.map((t): PaymentTransaction => {
    const status = fundingStatus(state, t);
    return {
      tx_hash: t.txHash,
      log_index: t.logIndex,
      from: t.from,
      minted: t.minted === true,
      amount: t.amount,
      asset: t.asset,
      token_symbol: symbolOf(t.asset),
      chain: t.chain,
      block_number: t.blockNumber,
      is_funding: status.isFunding,
      non_funding_reason: status.nonFundingReason,
      confirmed: t.confirmed,
    };
  });
  const payers = [
    ...new Set(state.transfers.filter((t) => fundingStatus(state, t).isFunding).map((t) => t.from)),
  ];
  // The payer first (the attested one once deployed): the refund's destination is payer_addresses[0]. A payer the
  // merchant disputed is not listed (the payer logs say it is not the payer; its transfers stay in `transactions`),
  // unless the admin attested it again.
  const payer = state.deployment ? state.deployment.payer : payers.length > 0 ? payerOf(state) : null;
  const disputed = new Set(
    state.payerLogs.filter((l) => l.kind === 'disputed').map((l) => l.payer.toLowerCase()),
  );
  const funders = payers.filter(
    (a) => a.toLowerCase() !== payer?.toLowerCase() && !disputed.has(a.toLowerCase()),
  );
  const lastSettlementDelay = state.settlementDelayReasons.at(-1);
  return {
    id: created.paymentId,
    object: 'payment',
    checkout_id: created.checkoutId,
    status: paymentStatus(state),
    method: created.method,
    amount: created.amount,
    amount_paid: amountPaid(state).toString(),
    currency: created.currency,
    detected_asset: detected?.asset ?? null,
    detected_token_symbol: detected?.symbol ?? null,
    detected_chain: detected?.chain ?? null,
    token_amount: detected?.tokenAmount ?? null,
    token_amount_decimal: detected
      ? formatTokenAmount(BigInt(detected.tokenAmount), detected.decimals)
      : null,
    on_chain_id: created.onChainId,
    deposit_address: created.depositAddress,
    deploy_tx_hash: state.deployment?.txHash ?? null,
    deploy_hold_reason: state.deployment ? null : (state.deployHold?.reason ?? null),
    payer_addresses: payer ? [payer, ...funders] : funders,
    payer_status: payerStatus(state),
    payer_final_at: state.deployment?.payerFinalAt ?? null,
    transactions,
    non_funding_transactions_count: transactions.filter((t) => !t.is_funding).length,
    amount_captured: state.captured.toString(),
    amount_refunded: state.refunded.toString(),
    authorization_expires_at: state.authorizationExpiry,
    expires_at: created.expiresAt,
    metadata: created.metadata,
    ...(state.failure
      ? { failure_reason: state.failure.reason, failure_message: state.failure.message }
      : {}),
    ...(state.recoverable
      ? {
          recoverable_reason: state.recoverable.reason,
          recovery_destination: state.recoverable.payerUnknown ? null : state.recoverable.destination,
          recoverable_amount: state.recoverable.amount.toString(),
          recoverable_asset: state.recoverable.asset,
          recoverable_chain: chainOfAsset(state, state.recoverable.asset),
        }
      : {}),
    ...(state.dustRecoveryRequestedAt !== null
      ? { recovery_requested_at: state.dustRecoveryRequestedAt }
      : {}),
    recovered_amounts: assetAmounts(state.recovered),
    rescued_amounts: assetAmounts(state.rescued),
    ...(state.settlementFailureReason
      ? { settlement_failure_reason: state.settlementFailureReason }
      : lastSettlementDelay && lastSettlementDelay !== 'unknown'
        ? { settlement_failure_reason: lastSettlementDelay as SettlementFailureReason }
        : {}),
    settlement_status: state.settlement?.status ?? null,
    settlement_exposure: state.settlementExposure
      ? {
          reason: state.settlementExposure.reason,
          amount: created.amount,
          currency: created.currency,
          recorded_at: state.settlementExposure.at,
        }
      : null,
    created_at: created.createdAt,
    updated_at: state.updatedAt ?? created.createdAt,
  };
}

export type CheckoutStatus = ReturnType<typeof checkoutStatus>;

/** Ours (SPEC: "not shown"): the checkout session the merchant created; its payment carries the money facts. */
export interface CheckoutObject {
  readonly id: string;
  readonly object: 'checkout';
  readonly status: CheckoutStatus;
  readonly payment_id: string;
  readonly amount: string;
  readonly currency: string;
  readonly method: 'DIRECT' | 'TWO_STEP';
  readonly accepted_chains: readonly string[];
  readonly accepted_assets: ReadonlyArray<{
    readonly asset: string;
    readonly chain: string;
    readonly token_symbol: string;
    readonly token_amount: string;
    readonly token_amount_decimal: string;
  }>;
  readonly deposit_address: string;
  /** Ours: the asset chosen before paying (alternate surface's configure), else null (every accepted asset). */
  readonly selected_asset: string | null;
  readonly checkout_url: string;
  readonly success_url: string | null;
  readonly cancel_url: string | null;
  readonly metadata: Readonly<Record<string, string>>;
  readonly expires_at: string;
  readonly created_at: string;
  readonly updated_at: string;
}

export function toCheckoutObject(state: PaymentState): CheckoutObject {
  const created = state.created;
  if (!created) throw new Error('toCheckoutObject: the checkout was never created');
  const status = checkoutStatus(state);
  return {
    id: created.checkoutId,
    object: 'checkout',
    status,
    payment_id: created.paymentId,
    amount: created.amount,
    currency: created.currency,
    method: created.method,
    accepted_chains: [...new Set(created.acceptedAssets.map((a) => a.chain))],
    accepted_assets: created.acceptedAssets.map((a) => ({
      asset: a.asset,
      chain: a.chain,
      token_symbol: a.symbol,
      token_amount: a.tokenAmount,
      token_amount_decimal: formatTokenAmount(BigInt(a.tokenAmount), a.decimals),
    })),
    deposit_address: created.depositAddress,
    selected_asset: state.selectedAsset,
    checkout_url: created.checkoutUrl,
    success_url: created.successUrl,
    cancel_url: created.cancelUrl,
    metadata: created.metadata,
    expires_at: created.expiresAt,
    created_at: created.createdAt,
    updated_at: state.updatedAt ?? created.createdAt,
  };
}
