import { defineCommands } from '@stablepay/commands';
import type { AuthenticatedMerchant } from '@stablepay/http';

/**
 * The merchant's actions on a payment after its deposit, sent by the gateway to the payments service (owner of the
 * payment stream): capture, refund and rescue carry the merchant's EIP-712 signature, recover carries nothing
 * (its destination is derived on chain). JSON payloads.
 */
export const PAYMENT_ACTION_COMMANDS = defineCommands('payments', {
  capture: 'payments.payment.capture',
  refund: 'payments.payment.refund',
  rescue: 'payments.payment.rescue',
  recover: 'payments.payment.recover',
  dispute_payer: 'payments.payment.dispute-payer',
});

/**
 * The operator's attestation of a payment's payer after the merchant's dispute (`POST
 * /admin/merchants/:merchantId/payments/:id/payer-attestations`): payload `PayerAttestationCommand`, answer
 * `PayerAttestationResult`, the call the registry admin's cold key signs and sends (nothing is sent by the service).
 */
export const PAYMENT_OPERATOR_COMMANDS = defineCommands('payments', {
  payerAttestation: 'payments.payment.payer-attestation',
});

export interface PayerAttestationCommand {
  readonly merchantId: string;
  readonly paymentId: string;
  /** The body as sent (`{ payer }`, checked by the owner). */
  readonly body: unknown;
}

export interface PayerAttestationResult {
  /** CAIP-2 of the deposit's chain. */
  readonly chain: string;
  /** The deposit contract. */
  readonly to: string;
  /** `attestPayer(payer)` calldata. */
  readonly data: string;
  readonly payer: string;
  /** The registry admin, the only key the call passes from. */
  readonly admin: string;
}

/** The request body as the merchant sent it (fields checked by the owner's preflight; unknown ones refused here). */
export interface SignedActionRequest {
  readonly amount?: unknown;
  readonly deadline?: unknown;
  readonly signature?: unknown;
  readonly token?: unknown;
  readonly to?: unknown;
  readonly payer?: unknown;
  readonly epoch?: unknown;
}

export interface PaymentActionCommand {
  /** The Idempotency-Key, else an id fresh per request: a retried request submits nothing twice. */
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly paymentId: string;
  readonly body: SignedActionRequest;
}

/**
 * The owner's answer. `submission`: `confirmed` (mined, its outflow recorded at `revision`), `pending` (broadcast,
 * the receipt did not come in time; recorded when observed), `replayed` (this command id was applied before),
 * `requested` (a recover of an abandoned deposit's dust: the request is recorded and the deposit is being deployed
 * for it; nothing was sent: 202).
 */
export interface PaymentActionResult {
  readonly paymentId: string;
  readonly revision: number;
  readonly txHash: string | null;
  readonly submission: 'confirmed' | 'pending' | 'replayed' | 'requested';
}
