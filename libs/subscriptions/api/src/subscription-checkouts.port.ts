import type { AuthenticatedMerchant, ListEnvelope, ListQuery } from '@stablepay/http';
import type {
  CreateSubscriptionCheckoutInput,
  SubscriptionCheckoutObject,
  SubscriptionCheckoutStatus,
  SubscriptionOption,
} from '@stablepay/subscriptions-domain';

/** SPEC Rules 7: the branding colors from settings, echoed on subscription checkout responses. */
export interface BrandingColors {
  readonly background_color: string | null;
  readonly primary_color: string | null;
}

/**
 * The subscription checkout as the API returns it: the object, the branding colors, and on create and get the
 * `subscription_options` (never on webhooks; not on lists or cancel, where they would be stale or meaningless).
 */
export type SubscriptionCheckoutResource = SubscriptionCheckoutObject &
  BrandingColors & { readonly subscription_options?: readonly SubscriptionOption[] };

/** GET /subscription-checkouts filters; created bounds are inclusive (gte, lte) or exclusive (gt, lt). */
export interface SubscriptionCheckoutListFilters {
  readonly status?: SubscriptionCheckoutStatus;
  readonly externalCustomerId?: string;
  readonly createdGte?: Date;
  readonly createdGt?: Date;
  readonly createdLte?: Date;
  readonly createdLt?: Date;
}

/** What the hosted subscribe page needs. */
export interface HostedSubscribeView {
  readonly checkout: SubscriptionCheckoutObject;
  /**
   * The state the customer must see: a pending intent past expires_at shows as expired before the timer records it;
   * a pending intent of the other mode than the deployment's chains (recorded before such intents were refused) as
   * `unavailable`: its subscribe is refused, so the page offers none.
   */
  readonly status: SubscriptionCheckoutStatus | 'unavailable';
  readonly options: readonly SubscriptionOption[];
  readonly backgroundColor: string | null;
  readonly primaryColor: string | null;
}

/**
 * The inbound port of the subscriptions scope that the gateway's controllers call. Implemented in
 * @stablepay/subscriptions-service; for now the gateway calls it in-process (as it does the merchant aggregate).
 */
export interface SubscriptionCheckoutsUseCases {
  /**
   * `origin` is the gateway's own address (`{hosted_url}` defaults to `<origin>/hosted`), never the Host header.
   * `idempotencyKey` (the request's Idempotency-Key) makes a retried create name the same intent.
   */
  create(
    merchant: AuthenticatedMerchant,
    input: CreateSubscriptionCheckoutInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<SubscriptionCheckoutResource>;
  retrieve(merchant: AuthenticatedMerchant, id: string): Promise<SubscriptionCheckoutResource>;
  list(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: SubscriptionCheckoutListFilters,
  ): Promise<ListEnvelope<SubscriptionCheckoutResource>>;
  /**
   * PATCH /subscription-checkouts/:id/cancel. With an Idempotency-Key, a retry whose first attempt cancelled answers
   * the cancelled intent (the key names the cancel's command); without one a second cancel is 409.
   */
  cancel(
    merchant: AuthenticatedMerchant,
    id: string,
    idempotencyKey?: string,
  ): Promise<SubscriptionCheckoutResource>;
  /** Public: null when no such intent exists. */
  hostedView(id: string): Promise<HostedSubscribeView | null>;
  /** Public: the customer dismissed the hosted page; cancels a pending intent, does nothing otherwise. */
  dismiss(id: string): Promise<void>;
}

export const SUBSCRIPTION_CHECKOUTS = Symbol('SUBSCRIPTION_CHECKOUTS');
