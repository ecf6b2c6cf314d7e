/**
 * What the hosted cancel page `{hosted_url}/cancel/:subscription_id` shows, and nothing more: the subscription's
 * on-chain coordinates (public on chain anyway), the business's name and colors, and the way back to it. No merchant
 * id, no metadata, no amounts another party could use.
 */
export interface HostedCancelView {
  readonly subscription_id: string;
  /**
   * `unavailable` in place of `active` for a subscription of the other mode than the deployment's chains (recorded
   * before subscribes of such merchants were refused): this deployment neither serves nor follows those chains, so
   * the page offers no on-chain cancel (as the pay and subscribe pages offer nothing to pay for such records).
   */
  readonly status: 'active' | 'cancelling' | 'cancelled' | 'unavailable';
  readonly subscriber: string;
  readonly chain: string;
  readonly chain_id: number;
  readonly chain_name: string;
  readonly token_symbol: string;
  /** The merchant's SubscriptionManager on that chain (the contract the subscriber calls); null when `unavailable`. */
  readonly manager_address: string | null;
  readonly business_name: string;
  /** The intent's cancel_url (else return_url), `{SUBSCRIPTION_CHECKOUT_ID}` filled in: where a lost wallet goes. */
  readonly cancel_url: string | null;
  readonly background_color: string | null;
  readonly primary_color: string | null;
}

export interface HostedCancelViews {
  /** Public: null when no such subscription is known. */
  view(subscriptionId: string): Promise<HostedCancelView | null>;
}

export const HOSTED_CANCEL_VIEWS = Symbol('HOSTED_CANCEL_VIEWS');
