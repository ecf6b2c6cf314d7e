import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { CLOCK } from '@stablepay/aggregate';
import { chainModeServed } from '@stablepay/chain-operator';
import { CommandClient } from '@stablepay/commands';
import { type AuthenticatedMerchant, type ListEnvelope, listEnvelope, type ListQuery } from '@stablepay/http';
import {
  type CancelSubscriptionCheckoutCommand,
  type CreateSubscriptionCheckoutCommand,
  type DismissSubscriptionCheckoutCommand,
  type HostedSubscribeView,
  SUBSCRIPTION_CHECKOUT_COMMANDS,
  type SubscriptionCheckoutCommandResult,
  type SubscriptionCheckoutListFilters,
  type SubscriptionCheckoutResource,
  type SubscriptionCheckoutsUseCases,
} from '@stablepay/subscriptions-api';
import {
  type CreateSubscriptionCheckoutInput,
  subscriptionOptions,
  type SubscriptionCheckoutObject,
} from '@stablepay/subscriptions-domain';
import type { Clock } from '@stablepay/util';
import { MerchantProfiles } from './merchant-profiles';
import { SubscriptionCheckoutPresenter } from './subscription-checkout.presenter';
import { SubscriptionCheckoutReader } from './subscription-checkout.reader';
import { subscriptionCheckoutWebhookObject } from './webhook-object';

/**
 * The gateway's side of the subscription checkout use cases (the port its controllers call): commands go to the
 * subscriptions service, which owns the aggregate, through the CommandClient; the answer's revision is awaited
 * in the read model (read-your-writes), which is also where every read comes from.
 */
@Injectable()
export class SubscriptionCheckoutsGateway implements SubscriptionCheckoutsUseCases {
  constructor(
    @Inject(CommandClient) private readonly commands: CommandClient,
    @Inject(SubscriptionCheckoutReader) private readonly reader: SubscriptionCheckoutReader,
    @Inject(SubscriptionCheckoutPresenter) private readonly presenter: SubscriptionCheckoutPresenter,
    @Inject(MerchantProfiles) private readonly profiles: MerchantProfiles,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async create(
    merchant: AuthenticatedMerchant,
    input: CreateSubscriptionCheckoutInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<SubscriptionCheckoutResource> {
    const command: CreateSubscriptionCheckoutCommand = {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      input,
      origin,
    };
    const done = await this.commands.send<SubscriptionCheckoutCommandResult>(
      'subscriptions',
      SUBSCRIPTION_CHECKOUT_COMMANDS.create,
      command,
    );
    const row = await this.reader.getAtLeast(done.id, done.revision, { appended: done.appended === true });
    const branding = done.branding ?? (await this.profiles.get(merchant.merchantId));
    return this.presenter.present(row, branding, await this.presenter.quote(row.object.price_currency));
  }

  async retrieve(merchant: AuthenticatedMerchant, id: string): Promise<SubscriptionCheckoutResource> {
    const row = await this.reader.getOwned(merchant.merchantId, id);
    const profile = await this.profiles.get(merchant.merchantId);
    return this.presenter.present(row, profile, await this.presenter.quote(row.object.price_currency));
  }

  async list(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: SubscriptionCheckoutListFilters,
  ): Promise<ListEnvelope<SubscriptionCheckoutResource>> {
    const { rows, hasMore } = await this.reader.list(merchant.merchantId, query, filters);
    const profile = await this.profiles.get(merchant.merchantId);
    return listEnvelope(
      rows.map((row) => this.presenter.present(row, profile)),
      hasMore,
    );
  }

  async cancel(
    merchant: AuthenticatedMerchant,
    id: string,
    idempotencyKey?: string,
  ): Promise<SubscriptionCheckoutResource> {
    // A keyed cancel's command id derives from its key, so a retry whose first attempt cancelled (its answer lost)
    // finds that cancel in the intent's stream and is answered the cancelled intent instead of 409. No interceptor
    // claims a PATCH's key: the prefix keeps it apart from the same key sent on the intent's create, whose event
    // id derives from the bare key in this same stream.
    const commandId = idempotencyKey === undefined ? randomUUID() : `merchant-cancel\u0000${idempotencyKey}`;
    const command: CancelSubscriptionCheckoutCommand = { commandId, merchant, id };
    const done = await this.commands.send<SubscriptionCheckoutCommandResult>(
      'subscriptions',
      SUBSCRIPTION_CHECKOUT_COMMANDS.cancel,
      command,
    );
    const row = await this.reader.getAtLeast(done.id, done.revision);
    return this.presenter.present(row, await this.profiles.get(merchant.merchantId));
  }

  async hostedView(id: string): Promise<HostedSubscribeView | null> {
    const row = await this.reader.find(id);
    if (!row) return null;
    const object: SubscriptionCheckoutObject = row.object;
    // An intent of the other mode than this deployment's chains (recorded before create refused them) cannot be
    // subscribed to here (the subscribe call answers 409): the customer gets a state page, not a picker.
    const status: HostedSubscribeView['status'] =
      object.status !== 'pending'
        ? object.status
        : this.clock.now().getTime() >= Date.parse(object.expires_at)
          ? 'expired'
          : chainModeServed(this.presenter.chainMode, row.mode)
            ? 'pending'
            : 'unavailable';
    const profile = await this.profiles.get(row.merchant_id);
    const options =
      status === 'pending'
        ? subscriptionOptions(
            object,
            this.presenter.offeredChains(row.mode),
            await this.presenter.quote(object.price_currency),
          )
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
    const command: DismissSubscriptionCheckoutCommand = { commandId: randomUUID(), id };
    const done = await this.commands.send<SubscriptionCheckoutCommandResult | null>(
      'subscriptions',
      SUBSCRIPTION_CHECKOUT_COMMANDS.dismiss,
      command,
    );
    // The page that follows shows the state: wait until the read model has it.
    if (done) await this.reader.getAtLeast(done.id, done.revision);
  }
}
