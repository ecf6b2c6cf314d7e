import { defineCommands } from '@stablepay/commands';
import type { AuthenticatedMerchant } from '@stablepay/http';
import type { CreateSubscriptionCheckoutInput } from '@stablepay/subscriptions-domain';

/**
 * The commands of the SubscriptionCheckout aggregate, owned by the subscriptions service: what the gateway sends
 * (payloads are JSON) and what the owner answers (the stream revision its append reached, so the caller can wait
 * for its read model: read-your-writes).
 */
export const SUBSCRIPTION_CHECKOUT_COMMANDS = defineCommands('subscriptions', {
  create: 'subscriptions.subscription-checkout.create',
  cancel: 'subscriptions.subscription-checkout.cancel',
  dismiss: 'subscriptions.subscription-checkout.dismiss',
});

/**
 * Every command carries the id of the request that caused it: the Idempotency-Key when the caller sent one, else
 * an id fresh per HTTP request. The owner derives event ids (and a create, the new aggregate's id) from it, so a
 * command retried after a timeout or a 503 (the owner appended, the answer was lost) appends nothing twice.
 */
export interface CreateSubscriptionCheckoutCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly input: CreateSubscriptionCheckoutInput;
  /** The address the API was called on (`{hosted_url}` defaults to `<origin>/hosted`). */
  readonly origin: string;
}

export interface CancelSubscriptionCheckoutCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly id: string;
}

export interface DismissSubscriptionCheckoutCommand {
  readonly commandId: string;
  readonly id: string;
}

/** The owner's answer: the intent and the revision of its stream after the command. */
export interface SubscriptionCheckoutCommandResult {
  readonly id: string;
  readonly revision: number;
  /** True when this command appended that revision (false or absent: an idempotent no-op or an older owner). */
  readonly appended?: boolean;
  /**
   * The merchant's branding as the owner read it to decide a create, so the gateway presents the answer without
   * reading the merchant's settings a second time (absent: the gateway reads them).
   */
  readonly branding?: { readonly backgroundColor: string | null; readonly primaryColor: string | null };
}
