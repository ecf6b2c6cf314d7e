import type { AuthenticatedMerchant, ListEnvelope, ListQuery } from '@stablepay/http';
import type { CreatedBounds } from '@stablepay/util';
import type {
  CheckoutObject,
  CheckoutStatus,
  CreateCheckoutInput,
  PaymentListFilters,
  PaymentObject,
  PaymentStatus,
} from '@stablepay/payments-domain';

export type { CreatedBounds } from '@stablepay/util';
export type { PaymentListFilters } from '@stablepay/payments-domain';

/** GET /checkouts filters (docs/openapi.yaml). */
export interface CheckoutListFilters extends CreatedBounds {
  readonly status?: CheckoutStatus;
  readonly paymentId?: string;
}

/**
 * What the public hosted payment page shows, and nothing more: no merchant id, metadata, redirect URLs of other
 * merchants' sessions or payer data (GET /hosted/pay/:id/status, docs/openapi.yaml).
 */
export interface HostedPaymentStatus {
  readonly object: 'hosted_payment_status';
  readonly checkout_id: string;
  readonly payment_id: string;
  /**
   * pending (nothing confirmed yet; dust below 1% of the order counts as nothing), confirming (funds paying the
   * order arrived, waiting for confirmations, deploy or screening), paid (settled, in escrow, captured), expired, cancelled, failed, refunded, or recoverable /
   * flagged as the payment object says; unavailable (a payment of the other mode than the deployment's chains,
   * recorded before such checkouts were refused, in place of pending, confirming, expired or recoverable).
   */
  readonly status: HostedStatus;
  /** The payment object's status, for pages that want the detail. */
  readonly payment_status: PaymentStatus;
  readonly amount: string;
  readonly currency: string;
  readonly amount_paid: string;
  /** Empty for a payment of the other mode than the deployment's chains (none of them is its merchant's). */
  readonly accepted_assets: CheckoutObject['accepted_assets'];
  /**
   * Null for a payment of the other mode than the deployment's chains: nothing here deploys or moves what is sent
   * to it (the deposit worker holds it, `deploy_hold_reason` `chain_mode_mismatch`), so no customer is sent there.
   */
  readonly deposit_address: string | null;
  /** The token and chain chosen before paying (alternate surface), else null. */
  readonly selected_asset: string | null;
  readonly detected_asset: string | null;
  readonly detected_chain: string | null;
  readonly expires_at: string;
  readonly success_url: string | null;
  readonly cancel_url: string | null;
  readonly business_name: string;
  readonly background_color: string | null;
  readonly primary_color: string | null;
}

export type HostedStatus =
  | 'pending'
  | 'confirming'
  | 'paid'
  | 'expired'
  | 'cancelled'
  | 'failed'
  | 'refunded'
  | 'recoverable'
  | 'flagged'
  | 'unavailable';

/**
 * A checkout as the merchant's API shows it (POST/GET /checkouts, GET /checkouts/:id, cancel): the checkout object
 * with `deposit_address` null and `unavailable_reason` `chain_mode_mismatch` for a checkout of the other mode than
 * the deployment's chains (recorded before such checkouts were refused): nothing here deploys or moves what is sent
 * there (the deposit worker holds it), so no merchant is handed an address to give a customer, as the hosted page
 * gives none. The payment keeps its `deposit_address` (the record of where anything sent was held).
 */
export type CheckoutResource = Omit<CheckoutObject, 'deposit_address'> & {
  readonly deposit_address: string | null;
  /** Why the checkout cannot be paid on this deployment (then `deposit_address` is null); null when it can. */
  readonly unavailable_reason: 'chain_mode_mismatch' | null;
};

/**
 * Operator API (GET /admin/settlement-exposures): one payment whose fiat payout stands for a deposit a reorg took,
 * across merchants. `amount` in `currency` is the order's (what the payout paid out, the payment's `amount`: a
 * 6-decimal integer string); `payment_id` is the list's cursor.
 */
export interface SettlementExposureListItem {
  readonly object: 'settlement_exposure';
  readonly payment_id: string;
  readonly merchant_id: string;
  readonly mode: 'test' | 'live';
  readonly amount: string;
  readonly currency: string;
  readonly reason: 'deposit_lost_to_reorg';
  readonly recorded_at: string;
}

/** GET /admin/settlement-exposures filters: one mode's payments only. */
export interface SettlementExposureListFilters {
  readonly mode?: 'test' | 'live';
}

/**
 * The inbound port of the payments scope that the gateway's checkout and payment controllers call. Implemented
 * by PaymentsGateway in @stablepay/payments-service (reads in-process, commands sent to the payments service).
 */
export interface PaymentsUseCases extends PaymentRequestsUseCases {
  /** `idempotencyKey` (the request's Idempotency-Key) makes a retried create name the same checkout. */
  createCheckout(
    merchant: AuthenticatedMerchant,
    input: CreateCheckoutInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<CheckoutResource>;
  retrieveCheckout(merchant: AuthenticatedMerchant, id: string): Promise<CheckoutResource>;
  listCheckouts(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: CheckoutListFilters,
  ): Promise<ListEnvelope<CheckoutResource>>;
  /**
   * With the Idempotency-Key's command id, a retry whose first attempt cancelled but lost its answer is answered
   * the cancelled checkout (the command is found applied), not 409 `checkout_not_pending`.
   */
  cancelCheckout(merchant: AuthenticatedMerchant, id: string, commandId?: string): Promise<CheckoutResource>;
  retrievePayment(merchant: AuthenticatedMerchant, paymentId: string): Promise<PaymentObject>;
  listPayments(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: PaymentListFilters,
  ): Promise<ListEnvelope<PaymentObject>>;
  /** Public: the hosted page's view of a checkout (by checkout id); null when no such checkout exists. */
  hostedStatus(checkoutId: string): Promise<HostedPaymentStatus | null>;
  /** Operator (ADMIN_TOKEN): the open settlement exposures of every merchant, newest payment first. */
  listSettlementExposures(
    query: ListQuery,
    filters: SettlementExposureListFilters,
  ): Promise<ListEnvelope<SettlementExposureListItem>>;
}

/**
 * The alternate payment-request surface's view of a payment (docs/openapi.yaml `PaymentRequest`): the same
 * aggregate as a checkout, shown with the redirect `url` and the configured token and chain.
 */
export interface PaymentRequestObject {
  readonly object: 'payment_request';
  readonly id: string;
  readonly checkout_id: string;
  /** Where to send the customer: the hosted payment page (the checkout's checkout_url). */
  readonly url: string;
  readonly status: PaymentStatus;
  readonly amount: string;
  readonly currency: string;
  readonly method: 'DIRECT' | 'TWO_STEP';
  /** As the checkout shows it (CheckoutResource): null, with `unavailable_reason`, when this deployment cannot take it. */
  readonly deposit_address: string | null;
  readonly unavailable_reason: CheckoutResource['unavailable_reason'];
  readonly accepted_assets: CheckoutObject['accepted_assets'];
  /** The configured chain (CAIP-2) and token (symbol), null until configured. */
  readonly chain: string | null;
  readonly token: string | null;
  /** What to send of the configured token (smallest unit), null until configured. */
  readonly token_amount: string | null;
  readonly amount_paid: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly expires_at: string;
  readonly created_at: string;
  readonly updated_at: string;
}

/** GET /payment-requests/payments/:paymentId: the request and the full payment object. */
export type PaymentRequestDetails = PaymentRequestObject & { readonly payment: PaymentObject };

/** GET /payment-requests/payments/:paymentId/status: what a poller needs. */
export interface PaymentRequestStatus {
  readonly object: 'payment_request_status';
  readonly id: string;
  readonly status: PaymentStatus;
  /** As on the payment request: why this deployment cannot take the payment, else null. */
  readonly unavailable_reason: CheckoutResource['unavailable_reason'];
  readonly amount_paid: string;
  readonly detected_asset: string | null;
  readonly detected_chain: string | null;
  readonly expires_at: string;
  readonly updated_at: string;
}

/** The alternate payment-request surface (x-api-key), over the same Payment aggregate. */
export interface PaymentRequestsUseCases {
  createPaymentRequest(
    merchant: AuthenticatedMerchant,
    input: CreateCheckoutInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<PaymentRequestObject>;
  retrievePaymentRequest(merchant: AuthenticatedMerchant, paymentId: string): Promise<PaymentRequestDetails>;
  configurePaymentRequest(
    merchant: AuthenticatedMerchant,
    paymentId: string,
    choice: { readonly chain: unknown; readonly token: unknown },
  ): Promise<PaymentRequestObject>;
  paymentRequestStatus(merchant: AuthenticatedMerchant, paymentId: string): Promise<PaymentRequestStatus>;
}

export const PAYMENTS_USE_CASES = Symbol('PAYMENTS_USE_CASES');
