import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { CommandClient } from '@stablepay/commands';
import { type AuthenticatedMerchant, type ListEnvelope, listEnvelope, type ListQuery } from '@stablepay/http';
import {
  type CancelSubscriptionCommand,
  type CancelSubscriptionInput,
  type SubscribeAuthorizationResource,
  type SubscribeCommand,
  type SubscribeCommandResult,
  type SubscribeInput,
  type SubscribeRecordedResource,
  SUBSCRIPTION_COMMANDS,
  type SubscriptionCommandResult,
  type SubscriptionListFilters,
  type SubscriptionsUseCases,
} from '@stablepay/subscriptions-api';
import { type SubscriptionObject, subscriptionObjectAt } from '@stablepay/subscriptions-domain';
import { ChainTime } from './chain-access';
import { rowWindowFacts, type SubscriptionRow, SubscriptionReader } from './subscription.reader';

/**
 * The gateway's side of the subscription use cases: reads from the `subscriptions` read model, brought to the chain's
 * time (the window fields); commands sent to the subscriptions service, then its revision awaited (read-your-writes).
 */
@Injectable()
export class SubscriptionsGateway implements SubscriptionsUseCases {
  constructor(
    @Inject(CommandClient) private readonly commands: CommandClient,
    @Inject(SubscriptionReader) private readonly reader: SubscriptionReader,
    @Inject(ChainTime) private readonly chains: ChainTime,
  ) {}

  async present(row: SubscriptionRow): Promise<SubscriptionObject> {
    return subscriptionObjectAt(row.object, rowWindowFacts(row), await this.chains.now(row.mode, row.chain));
  }

  async subscribe(
    checkoutId: string,
    input: SubscribeInput,
  ): Promise<SubscribeAuthorizationResource | SubscribeRecordedResource> {
    const command: SubscribeCommand = { commandId: randomUUID(), checkoutId, ...input };
    const result = await this.commands.send<SubscribeCommandResult>(
      'subscriptions',
      SUBSCRIPTION_COMMANDS.subscribe,
      command,
    );
    if (result.object === 'subscribe_authorization') return result;
    const row =
      result.revision === null
        ? undefined
        : await this.reader.getAtLeast(result.subscriptionId, result.revision);
    return {
      object: 'subscribe_result',
      status: result.status,
      subscription_checkout_id: result.subscription_checkout_id,
      tx_hash: result.tx_hash,
      subscription: row ? await this.present(row) : null,
    };
  }

  async retrieve(merchant: AuthenticatedMerchant, id: string): Promise<SubscriptionObject> {
    return this.present(await this.reader.getOwned(merchant, id));
  }

  async list(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: SubscriptionListFilters,
  ): Promise<ListEnvelope<SubscriptionObject>> {
    const { rows, hasMore } = await this.reader.list(merchant, query, filters);
    return listEnvelope(await Promise.all(rows.map((row) => this.present(row))), hasMore);
  }

  async cancel(
    merchant: AuthenticatedMerchant,
    id: string,
    input: CancelSubscriptionInput,
    commandId?: string,
  ): Promise<SubscriptionObject> {
    const command: CancelSubscriptionCommand = {
      commandId: commandId ?? randomUUID(),
      merchant,
      id,
      ...input,
    };
    const done = await this.commands.send<SubscriptionCommandResult>(
      'subscriptions',
      SUBSCRIPTION_COMMANDS.cancel,
      command,
    );
    return this.present(await this.reader.getAtLeast(done.id, done.revision));
  }
}
