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
});

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
