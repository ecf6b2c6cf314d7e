import type { AuthenticatedMerchant, ListEnvelope, ListQuery } from '@stablepay/http';
import type {
  BeneficiaryObject,
  CreateBeneficiaryInput,
  CreateCustomerInput,
  CreatePayoutInput,
  CustomerObject,
  CustomerStatus,
  PayoutObject,
  PayoutStatus,
  RefundHeldInput,
} from '@stablepay/payouts-domain';
import type { SimulateDepositInput } from './payouts.commands';

export interface CustomerListFilters {
  readonly status?: CustomerStatus;
  readonly email?: string;
}

export interface PayoutListFilters {
  readonly status?: PayoutStatus;
  readonly customer?: string;
  readonly beneficiary?: string;
}

/** What the public hosted KYC page shows: the business, the session's state; no customer data. */
export interface HostedKycView {
  readonly businessName: string;
  readonly backgroundColor: string | null;
  readonly primaryColor: string | null;
  /** `open`: the customer can complete the step; otherwise why not (the customer's state or the link's). */
  readonly state: 'open' | 'used' | 'expired' | 'active' | 'action_required' | 'kyc_failed' | 'suspended';
}

/** POST /test_helpers/customers/:id/deposits: the payout the deposit funded (null: none was waiting for it). */
export interface SimulatedDepositResource {
  readonly object: 'test_helpers.deposit';
  readonly customer: string;
  readonly payout: PayoutObject | null;
}

/**
 * The inbound port of the payouts scope (beta) that the gateway's controllers call; implemented by PayoutsGateway in
 * @stablepay/payouts-service (commands to the payouts service, reads from its read models).
 */
export interface PayoutsUseCases {
  /** Whether the operator enabled the payouts beta for the merchant (SPEC: "must be enabled per account"). */
  betaEnabled(merchant: AuthenticatedMerchant): Promise<boolean>;
  createCustomer(
    merchant: AuthenticatedMerchant,
    input: CreateCustomerInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<CustomerObject>;
  retrieveCustomer(merchant: AuthenticatedMerchant, id: string): Promise<CustomerObject>;
  /** A fresh `kyc_url` (24 h) replacing the open one; 409 `kyc_not_required` for a customer past KYC. */
  issueKycLink(
    merchant: AuthenticatedMerchant,
    customerId: string,
    idempotencyKey?: string,
  ): Promise<CustomerObject>;
  listCustomers(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: CustomerListFilters,
  ): Promise<ListEnvelope<CustomerObject>>;
  createBeneficiary(
    merchant: AuthenticatedMerchant,
    input: CreateBeneficiaryInput,
    idempotencyKey?: string,
  ): Promise<BeneficiaryObject>;
  retrieveBeneficiary(merchant: AuthenticatedMerchant, id: string): Promise<BeneficiaryObject>;
  listBeneficiaries(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
  ): Promise<ListEnvelope<BeneficiaryObject>>;
  /**
   * The operator's record that the off-ramp returned a withheld refund (`to`, `tx_hash`/`reference`): the payout of
   * merchant `merchantId` in either mode (another's is 404), answered `refunded` (docs/payouts.md).
   */
  recordWithheldRefundReturn(
    merchantId: string,
    payoutId: string,
    input: unknown,
    idempotencyKey?: string,
  ): Promise<PayoutObject>;
  createPayout(
    merchant: AuthenticatedMerchant,
    input: CreatePayoutInput,
    idempotencyKey?: string,
  ): Promise<PayoutObject>;
  retrievePayout(merchant: AuthenticatedMerchant, id: string): Promise<PayoutObject>;
  listPayouts(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: PayoutListFilters,
  ): Promise<ListEnvelope<PayoutObject>>;
  /**
   * A failed payout whose funds are held at its deposit address (`customer_not_active`) back to its sender, signed
   * by the merchant; the payout after it (`refunded`).
   */
  refundHeld(
    merchant: AuthenticatedMerchant,
    payoutId: string,
    input: RefundHeldInput,
    idempotencyKey?: string,
  ): Promise<PayoutObject>;
  simulateDeposit(
    merchant: AuthenticatedMerchant,
    customerId: string,
    input: SimulateDepositInput,
    idempotencyKey?: string,
  ): Promise<SimulatedDepositResource>;
  /** The hosted KYC page's view of a session; null for an unknown one. */
  hostedKyc(sessionId: string): Promise<HostedKycView | null>;
  /** The customer completed the hosted step: the KYC provider reviews it and the customer moves on. */
  submitKyc(sessionId: string): Promise<void>;
}

export const PAYOUTS_USE_CASES = Symbol('PAYOUTS_USE_CASES');
