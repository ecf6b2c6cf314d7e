import { defineCommands } from '@stablepay/commands';
import type { AuthenticatedMerchant } from '@stablepay/http';
import type { CreateCheckoutInput } from '@stablepay/payments-domain';

/**
 * The commands of the Payment aggregate owned by the payments service that the gateway's checkout routes send
 * (payloads are JSON), and what the owner answers: the stream revision its append reached, so the caller waits
 * for its read model (read-your-writes). Other use cases of the same aggregate define their own commands beside
 * these (one `defineCommands('payments', ...)` per use-case group).
 */
export const CHECKOUT_COMMANDS = defineCommands('payments', {
  create: 'payments.checkout.create',
  cancel: 'payments.checkout.cancel',
});

/**
 * Every command carries the id of the request that caused it: the Idempotency-Key when the caller sent one, else
 * an id fresh per HTTP request. The owner derives event ids (and on create the checkout and payment ids) from it,
 * so a command retried after a timeout or a 503 appends nothing twice.
 */
export interface CreateCheckoutCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly input: CreateCheckoutInput;
  /** The address the API was called on (`{hosted_url}` defaults to `<origin>/hosted`). */
  readonly origin: string;
}

export interface CancelCheckoutCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  /** The checkout id (`chk_...`). */
  readonly id: string;
}

/** The owner's answer: the checkout, its payment, and the revision of the payment stream after the command. */
export interface CheckoutCommandResult {
  readonly checkoutId: string;
  readonly paymentId: string;
  readonly revision: number;
}

/** The alternate payment-request surface's own command (its create is CHECKOUT_COMMANDS.create). */
export const PAYMENT_REQUEST_COMMANDS = defineCommands('payments', {
  configure: 'payments.payment.configure',
});

/** POST /payment-requests/payments/configure/:paymentId: the token and chain the payer will send. */
export interface ConfigurePaymentCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  /** The payment id (`pay_...`). */
  readonly id: string;
  readonly chain: unknown;
  readonly token: unknown;
}

/**
 * The operator's re-scan of a payment's deposit address (`POST /admin/merchants/:merchantId/payments/:id/deposit-rescans`):
 * payload `DepositRescanCommand`, answer `DepositRescanAnswer[]` (@stablepay/chain-operator).
 */
export const PAYMENT_DEPOSIT_COMMANDS = defineCommands('payments', {
  rescan: 'payments.deposit.rescan',
});
