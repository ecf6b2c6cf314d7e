import { Inject, Injectable } from '@nestjs/common';
import { getAddress } from 'ethers';
import { DataSource } from 'typeorm';
import { chainModeServed } from '@stablepay/chain-operator';
import type { HostedCancelView, HostedCancelViews } from '@stablepay/subscriptions-api';
import { MerchantProfiles } from '../subscription-checkouts/merchant-profiles';
import { SubscriptionCheckoutReader } from '../subscription-checkouts/subscription-checkout.reader';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { SubscriptionReader } from './subscription.reader';

/**
 * The hosted cancel page's read (gateway side): the subscription read model, the manager recorded for its merchant
 * and chain (`subscription_managers`, same database), the intent's way back, and the merchant's name and colors. An
 * active subscription of the other mode than the deployment's chains is `unavailable` (docs/hosted-pages.md).
 */
@Injectable()
export class HostedCancelPageViews implements HostedCancelViews {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(SubscriptionReader) private readonly subscriptions: SubscriptionReader,
    @Inject(SubscriptionCheckoutReader) private readonly checkouts: SubscriptionCheckoutReader,
    @Inject(MerchantProfiles) private readonly profiles: MerchantProfiles,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
  ) {}

  async view(subscriptionId: string): Promise<HostedCancelView | null> {
    const row = await this.subscriptions.find(subscriptionId);
    if (!row) return null;
    // A subscription of the other mode than this deployment's chains: no cancel is offered, so no manager is needed
    // (one recorded under the same chain id would be this mode's contract, or another chain's altogether).
    const served = chainModeServed(this.config.chainMode, row.mode);
    const managers: { address: string }[] = served
      ? await this.dataSource.query(
          'SELECT address FROM subscription_managers WHERE merchant_id = $1 AND chain = $2',
          [row.merchant_id, row.chain],
        )
      : [];
    const manager = managers[0];
    if (served && !manager) return null;
    const profile = await this.profiles.get(row.merchant_id);
    const checkout = row.checkout_id ? await this.checkouts.find(row.checkout_id) : undefined;
    const back = checkout ? (checkout.object.cancel_url ?? checkout.object.return_url) : null;
    const chain = this.config.chains[row.mode].list().find((c) => c.caip2 === row.chain);
    return {
      subscription_id: row.id,
      status: served || row.status !== 'active' ? row.status : 'unavailable',
      subscriber: getAddress(row.subscriber),
      chain: row.chain,
      chain_id: Number(row.chain.split(':')[1]),
      chain_name: chain?.name ?? row.chain,
      token_symbol: row.object.token_symbol,
      manager_address: manager ? getAddress(manager.address) : null,
      business_name: profile.businessName,
      cancel_url:
        back && checkout
          ? back.split('{SUBSCRIPTION_CHECKOUT_ID}').join(encodeURIComponent(checkout.id))
          : null,
      background_color: profile.backgroundColor,
      primary_color: profile.primaryColor,
    };
  }
}
