import { defineCommands } from '@stablepay/commands';
import type { AuthenticatedMerchant } from '@stablepay/http';
import type {
  CreateBeneficiaryInput,
  CreateCustomerInput,
  CreatePayoutInput,
  RefundHeldInput,
} from '@stablepay/payouts-domain';

/**
 * The commands of the payouts service's aggregates (Customer, Beneficiary, Payout) that the gateway's routes send
 * (JSON payloads), and what the owner answers: the id and the revision its append reached, so the caller waits for
 * its read model (read-your-writes). Every command carries `commandId` (the Idempotency-Key, else an id fresh per
 * HTTP request): event ids and a created aggregate's id derive from it, so a retried command appends nothing twice.
 */
export const PAYOUTS_COMMANDS = defineCommands('payouts', {
  createCustomer: 'payouts.customer.create',
  submitKyc: 'payouts.customer.submit-kyc',
  issueKycLink: 'payouts.customer.issue-kyc-link',
  createBeneficiary: 'payouts.beneficiary.create',
  createPayout: 'payouts.payout.create',
  simulateDeposit: 'payouts.deposit.simulate',
  refundHeld: 'payouts.payout.refund-held',
  recordWithheldRefundReturn: 'payouts.payout.record-withheld-refund-return',
});

export interface CreateCustomerCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly input: CreateCustomerInput;
  /** The address the API was called on (`{hosted_url}` defaults to `<origin>/hosted`). */
  readonly origin: string;
}

/** The customer finished the hosted KYC step of a session (the public `{hosted_url}/kyc/:session` page). */
export interface SubmitKycCommand {
  readonly commandId: string;
  readonly sessionId: string;
}

/** POST /customers/:id/kyc_links: a fresh KYC link for a customer that still has to complete KYC. */
export interface IssueKycLinkCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly customerId: string;
}

export interface CreateBeneficiaryCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly input: CreateBeneficiaryInput;
}

export interface CreatePayoutCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly input: CreatePayoutInput;
}

/**
 * POST /payouts/:id/refund_held: a held payout's deposit back to the wallet it came from, from the deposit address,
 * with the merchant signer's PayoutRefund (docs/payouts.md "Held funds").
 */
export interface RefundHeldCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly payoutId: string;
  readonly input: RefundHeldInput;
}

/**
 * The operator's `POST /admin/merchants/:merchantId/payouts/:id/withheld-refund-returns`: the off-ramp returned a
 * withheld refund (docs/payouts.md, "Refund withheld at the off-ramp"). The merchant is the path's, in either mode.
 */
export interface RecordWithheldRefundReturnCommand {
  readonly commandId: string;
  readonly merchantId: string;
  readonly payoutId: string;
  readonly input: unknown;
}

/** Test mode only: crypto arriving at a customer's deposit address, as the chain would report it. */
export interface SimulateDepositCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly customerId: string;
  readonly input: SimulateDepositInput;
}

export interface SimulateDepositInput {
  readonly chain?: unknown;
  readonly token?: unknown;
  readonly amount?: unknown;
  readonly from?: unknown;
}

/** The owner's answer: the aggregate and its stream's revision after the command (-1: nothing to wait for). */
export interface PayoutsCommandResult {
  readonly id: string;
  readonly revision: number;
}

/**
 * The operator's re-scan of a customer's deposit addresses
 * (`POST /admin/merchants/:merchantId/customers/:id/deposit-rescans`): payload `DepositRescanCommand`, answer
 * `DepositRescanAnswer[]` (@stablepay/chain-operator).
 */
export const CUSTOMER_DEPOSIT_COMMANDS = defineCommands('payouts', {
  rescan: 'payouts.customer.deposit-rescan',
});
