import { Inject, Injectable } from '@nestjs/common';
import { CLOCK } from '@stablepay/aggregate';
import type { ChainInfo } from '@stablepay/evm';
import { type AuthenticatedMerchant, type ListEnvelope, listEnvelope, type ListQuery } from '@stablepay/http';
import type {
  HostedSubscribeView,
  SubscriptionCheckoutListFilters,
  SubscriptionCheckoutResource,
  SubscriptionCheckoutsUseCases,
} from '@stablepay/subscriptions-api';
import {
  type CreateSubscriptionCheckoutInput,
  type Rate,
  type RateSource,
  subscriptionOptions,
  type SubscriptionCheckoutObject,
} from '@stablepay/subscriptions-domain';
import { type Clock, DomainError } from '@stablepay/util';
import { RATE_SOURCE } from '../rates/rate-source.token';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { MerchantProfiles } from './merchant-profiles';
import { SubscriptionCheckoutCommands } from './subscription-checkout.commands';
import { type SubscriptionCheckoutRow, SubscriptionCheckoutReader } from './subscription-checkout.reader';
import { subscriptionCheckoutWebhookObject } from './webhook-object';

/** The use cases behind the gateway's subscription checkout routes and the hosted subscribe page. */
@Injectable()
export class SubscriptionCheckoutsApplication implements SubscriptionCheckoutsUseCases {
  constructor(
    @Inject(SubscriptionCheckoutCommands) private readonly commands: SubscriptionCheckoutCommands,
    @Inject(SubscriptionCheckoutReader) private readonly reader: SubscriptionCheckoutReader,
    @Inject(MerchantProfiles) private readonly profiles: MerchantProfiles,
    @Inject(RATE_SOURCE) private readonly rates: RateSource,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  /** The chains offered to a merchant of this mode (the registry, narrowed by SUPPORTED_CHAINS). */
  offeredChains(mode: 'test' | 'live'): readonly ChainInfo[] {
    const all = this.config.chains[mode].list();
    const only = this.config.supportedChains;
    return only ? all.filter((c) => only.includes(c.caip2)) : all;
  }

  private async quote(currency: string | null): Promise<readonly Rate[]> {
    return currency ? this.rates.quote(currency) : [];
  }

  private present(
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

  /** What deciding a create needs besides the input: the merchant, the rates and the offered chains. */
  private async createDetails(merchant: AuthenticatedMerchant, currencyInput: unknown, origin: string) {
    const profile = await this.profiles.get(merchant.merchantId);
    const currency =
      typeof currencyInput === 'string' && /^[A-Za-z]{3}$/.test(currencyInput)
        ? currencyInput.toUpperCase()
        : null;
    // One quote serves the currency check and the options of the response.
    const rates = await this.quote(currency);
    const chains = this.offeredChains(merchant.mode);
    const details = {
      businessName: profile.businessName,
      hostedUrl: this.config.hostedUrl ?? `${origin}/hosted`,
      context: {
        availableChains: chains.map((c) => ({
          caip2: c.caip2,
          tokenSymbols: c.stablecoins.map((s) => s.symbol),
        })),
        quotedTokenSymbols: rates.map((r) => r.tokenSymbol),
        settlement: profile.settlement,
      },
    };
    return { profile, rates, details };
  }

  async create(
    merchant: AuthenticatedMerchant,
    input: CreateSubscriptionCheckoutInput,
    origin: string,
  ): Promise<SubscriptionCheckoutResource> {
    const { profile, rates, details } = await this.createDetails(merchant, input.price_currency, origin);
    const { row } = await this.commands.create(
      { merchantId: merchant.merchantId, mode: merchant.mode },
      input,
      details,
    );
    return this.present(row, profile, rates);
  }

  /**
   * Creates many intents of one currency for a merchant in one go (same rules as create; see
   * SubscriptionCheckoutCommands.createMany). Returns their ids in input order.
   */
  async createMany(
    merchant: AuthenticatedMerchant,
    inputs: readonly CreateSubscriptionCheckoutInput[],
    options: { origin: string; concurrency?: number },
  ): Promise<string[]> {
    const currencies = new Set(inputs.map((i) => i.price_currency?.toUpperCase()));
    if (currencies.size > 1) throw new RangeError('createMany takes inputs of one price_currency');
    const { details } = await this.createDetails(merchant, inputs[0]?.price_currency, options.origin);
    return this.commands.createMany(
      { merchantId: merchant.merchantId, mode: merchant.mode },
      inputs,
      details,
      options.concurrency ?? 8,
    );
  }

  async retrieve(merchant: AuthenticatedMerchant, id: string): Promise<SubscriptionCheckoutResource> {
    const row = await this.reader.getOwned(merchant.merchantId, id);
    const profile = await this.profiles.get(merchant.merchantId);
    return this.present(row, profile, await this.quote(row.object.price_currency));
  }

  async list(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: SubscriptionCheckoutListFilters,
  ): Promise<ListEnvelope<SubscriptionCheckoutResource>> {
    const { rows, hasMore } = await this.reader.list(merchant.merchantId, query, filters);
    const profile = await this.profiles.get(merchant.merchantId);
    return listEnvelope(
      rows.map((row) => this.present(row, profile)),
      hasMore,
    );
  }

  async cancel(merchant: AuthenticatedMerchant, id: string): Promise<SubscriptionCheckoutResource> {
    const before = await this.reader.getOwned(merchant.merchantId, id);
    const { row } = await this.commands.cancel(before, 'merchant');
    return this.present(row, await this.profiles.get(merchant.merchantId));
  }

  async hostedView(id: string): Promise<HostedSubscribeView | null> {
    const row = await this.reader.find(id);
    if (!row) return null;
    const object: SubscriptionCheckoutObject = row.object;
    const due = object.status === 'pending' && this.clock.now().getTime() >= Date.parse(object.expires_at);
    const status = due ? 'expired' : object.status;
    const profile = await this.profiles.get(row.merchant_id);
    const options =
      status === 'pending'
        ? subscriptionOptions(object, this.offeredChains(row.mode), await this.quote(object.price_currency))
        : [];
    return {
      checkout: subscriptionCheckoutWebhookObject(row),
      status,
      options,
      backgroundColor: profile.backgroundColor,
      primaryColor: profile.primaryColor,
    };
  }

  async dismiss(id: string): Promise<void> {
    const row = await this.reader.find(id);
    if (!row || row.status !== 'pending') return;
    try {
      await this.commands.cancel(row, 'customer');
    } catch (error) {
      // Already completed, cancelled or expired meanwhile: the page shows that state.
      if (error instanceof DomainError && error.code === 'subscription_checkout_not_pending') return;
      throw error;
    }
  }
}
