import type { AuthenticatedMerchant, ListEnvelope, ListQuery } from '@stablepay/http';
import type {
  CheckoutObject,
  CheckoutStatus,
  CreateCheckoutInput,
  PaymentObject,
  PaymentStatus,
} from '@stablepay/payments-domain';

/** Created-at bounds shared by both lists: inclusive (gte, lte) or exclusive (gt, lt). */
export interface CreatedBounds {
  readonly createdGte?: Date;
  readonly createdGt?: Date;
  readonly createdLte?: Date;
  readonly createdLt?: Date;
}

/** GET /checkouts filters (docs/openapi.yaml). */
export interface CheckoutListFilters extends CreatedBounds {
  readonly status?: CheckoutStatus;
  readonly paymentId?: string;
}

/** GET /payments filters (docs/openapi.yaml). */
export interface PaymentListFilters extends CreatedBounds {
  readonly status?: PaymentStatus;
  readonly method?: 'DIRECT' | 'TWO_STEP';
  readonly checkoutId?: string;
  readonly depositAddress?: string;
  readonly detectedChain?: string;
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
   * pending (nothing confirmed yet), confirming (a transfer arrived, waiting for confirmations, deploy or
   * screening), paid (settled, in escrow, captured), expired, cancelled, failed, refunded, or recoverable /
   * flagged as the payment object says.
   */
  readonly status: HostedStatus;
  /** The payment object's status, for pages that want the detail. */
  readonly payment_status: PaymentStatus;
  readonly amount: string;
  readonly currency: string;
  readonly amount_paid: string;
  readonly accepted_assets: CheckoutObject['accepted_assets'];
  readonly deposit_address: string;
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
  | 'flagged';

/**
 * The inbound port of the payments scope that the gateway's checkout and payment controllers call. Implemented
 * by PaymentsGateway in @stablepay/payments-service (reads in-process, commands sent to the payments service).
 */
export interface PaymentsUseCases {
  /** `idempotencyKey` (the request's Idempotency-Key) makes a retried create name the same checkout. */
  createCheckout(
    merchant: AuthenticatedMerchant,
    input: CreateCheckoutInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<CheckoutObject>;
  retrieveCheckout(merchant: AuthenticatedMerchant, id: string): Promise<CheckoutObject>;
  listCheckouts(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: CheckoutListFilters,
  ): Promise<ListEnvelope<CheckoutObject>>;
  cancelCheckout(merchant: AuthenticatedMerchant, id: string): Promise<CheckoutObject>;
  retrievePayment(merchant: AuthenticatedMerchant, paymentId: string): Promise<PaymentObject>;
  listPayments(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: PaymentListFilters,
  ): Promise<ListEnvelope<PaymentObject>>;
  /** Public: the hosted page's view of a checkout (by checkout id); null when no such checkout exists. */
  hostedStatus(checkoutId: string): Promise<HostedPaymentStatus | null>;
}

export const PAYMENTS_USE_CASES = Symbol('PAYMENTS_USE_CASES');
