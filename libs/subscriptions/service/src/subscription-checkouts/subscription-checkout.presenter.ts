import { Inject, Injectable } from '@nestjs/common';
import type { ChainInfo } from '@stablepay/evm';
import type { SubscriptionCheckoutResource } from '@stablepay/subscriptions-api';
import { type Rate, type RateSource, subscriptionOptions } from '@stablepay/subscriptions-domain';
import { RATE_SOURCE } from '../rates/rate-source.token';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import type { SubscriptionCheckoutRow } from './subscription-checkout.reader';
import { subscriptionCheckoutWebhookObject } from './webhook-object';

/** The subscription checkout as the API shows it: the read model's object, branding colors, options from rates. */
@Injectable()
export class SubscriptionCheckoutPresenter {
  constructor(
    @Inject(RATE_SOURCE) private readonly rates: RateSource,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
  ) {}

  /** The mode of the chains this deployment runs (null: none). */
  get chainMode(): 'test' | 'live' | null {
    return this.config.chainMode;
  }

  /**
   * The chains offered to a merchant of this mode (the registry, narrowed by SUPPORTED_CHAINS); none when the
   * deployment runs the other mode's chains (an intent recorded before create refused it shows no options).
   */
  offeredChains(mode: 'test' | 'live'): readonly ChainInfo[] {
    if (this.config.chainMode !== null && this.config.chainMode !== mode) return [];
    const all = this.config.chains[mode].list();
    const only = this.config.supportedChains;
    return only ? all.filter((c) => only.includes(c.caip2)) : all;
  }

  async quote(currency: string | null): Promise<readonly Rate[]> {
    return currency ? this.rates.quote(currency) : [];
  }

  present(
    row: SubscriptionCheckoutRow,
    colors: { backgroundColor: string | null; primaryColor: string | null },
    rates?: readonly Rate[],
  ): SubscriptionCheckoutResource {
    const object = subscriptionCheckoutWebhookObject(row);
    return {
      ...object,
      ...(rates
        ? { subscription_options: subscriptionOptions(object, this.offeredChains(row.mode), rates) }
        : {}),
      background_color: colors.backgroundColor,
      primary_color: colors.primaryColor,
    };
  }
}
