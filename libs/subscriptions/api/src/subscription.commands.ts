import { defineCommands } from '@stablepay/commands';
import type { AuthenticatedMerchant } from '@stablepay/http';

/**
 * Commands of the Subscription aggregate and the subscribe flow, owned by the subscriptions service (JSON payloads;
 * answers carry what the gateway needs to wait for its read model).
 */
export const SUBSCRIPTION_COMMANDS = defineCommands('subscriptions', {
  subscribe: 'subscriptions.subscription-checkout.subscribe',
  cancel: 'subscriptions.subscription.cancel',
});

/** POST /subscription-checkouts/:id/subscribe (public: the hosted page). Without txHash: authorize; with: report. */
export interface SubscribeCommand {
  readonly commandId: string;
  readonly checkoutId: string;
  readonly chain: string;
  readonly asset: string;
  readonly subscriber: string;
  readonly txHash?: string;
}

/** The authorize answer: exactly the response body (docs/openapi.yaml SubscribeAuthorization). */
export interface SubscribeAuthorizationResource {
  readonly object: 'subscribe_authorization';
  readonly subscription_checkout_id: string;
  readonly subscription_id: string;
  readonly chain: string;
  readonly chain_id: number;
  readonly asset: string;
  readonly token_address: string;
  readonly token_symbol: string;
  readonly token_decimals: number;
  readonly subscriber: string;
  readonly manager_address: string;
  readonly price_amount: string;
  readonly cap_amount: string;
  readonly budget_amount: string;
  readonly first_charge_amount: string;
  readonly rate: { value: string; currency: string; as_of: string; source: string } | null;
  readonly authorization: {
    readonly subscriptionId: string;
    readonly subscriber: string;
    readonly token: string;
    readonly cap: string;
    readonly budget: string;
    readonly periodDuration: string;
    readonly firstChargeAmount: string;
    readonly deadline: string;
  };
  readonly operator_signature: string;
  readonly approval: { readonly token: string; readonly spender: string; readonly amount: string };
  readonly transactions: ReadonlyArray<{ readonly to: string; readonly data: string; readonly value: '0' }>;
}

/** The report answer: recorded (the subscription's stream revision to wait for) or still pending on chain. */
export interface SubscribeReported {
  readonly object: 'subscribe_result';
  readonly status: 'recorded' | 'pending';
  readonly subscription_checkout_id: string;
  readonly tx_hash: string;
  readonly subscriptionId: string;
  readonly revision: number | null;
}

export type SubscribeCommandResult = SubscribeAuthorizationResource | SubscribeReported;

/** POST /subscriptions/:id/cancel: the merchant's signCancelSubscription output. */
export interface CancelSubscriptionCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly id: string;
  readonly nonce: number;
  readonly deadline: number;
  readonly signature: string;
}

export interface SubscriptionCommandResult {
  readonly id: string;
  readonly revision: number;
}
