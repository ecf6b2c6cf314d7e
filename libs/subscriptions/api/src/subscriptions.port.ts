import type { AuthenticatedMerchant, ListEnvelope, ListQuery } from '@stablepay/http';
import type { SubscriptionListFilters, SubscriptionObject } from '@stablepay/subscriptions-domain';
import type { SubscribeAuthorizationResource } from './subscription.commands';

export type { SubscriptionListFilters } from '@stablepay/subscriptions-domain';

export interface SubscribeInput {
  readonly chain: string;
  readonly asset: string;
  readonly subscriber: string;
  readonly txHash?: string;
}

/** The report's response body (docs/openapi.yaml SubscribeRecorded). */
export interface SubscribeRecordedResource {
  readonly object: 'subscribe_result';
  readonly status: 'recorded' | 'pending';
  readonly subscription_checkout_id: string;
  readonly tx_hash: string;
  readonly subscription: SubscriptionObject | null;
}

export interface CancelSubscriptionInput {
  readonly nonce: number;
  readonly deadline: number;
  readonly signature: string;
}

/** The inbound port of the subscription routes (implemented by SubscriptionsGateway in the service lib). */
export interface SubscriptionsUseCases {
  /** Public (the hosted page): authorize, or report the subscribe transaction. */
  subscribe(
    checkoutId: string,
    input: SubscribeInput,
  ): Promise<SubscribeAuthorizationResource | SubscribeRecordedResource>;
  retrieve(merchant: AuthenticatedMerchant, id: string): Promise<SubscriptionObject>;
  list(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: SubscriptionListFilters,
  ): Promise<ListEnvelope<SubscriptionObject>>;
  /**
   * Merchant cancel. With the Idempotency-Key's command id, a retry whose first attempt cancelled but lost its
   * answer is answered the subscription, not 409 `subscription_cancelled`.
   */
  cancel(
    merchant: AuthenticatedMerchant,
    id: string,
    input: CancelSubscriptionInput,
    commandId?: string,
  ): Promise<SubscriptionObject>;
}

export const SUBSCRIPTIONS_USE_CASES = Symbol('SUBSCRIPTIONS_USE_CASES');
