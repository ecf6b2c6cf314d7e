import { type DynamicModule, Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { CommandClient } from '@stablepay/commands';
import { ChargeLedgerCoreModule, ChargeLedgerReader } from '@stablepay/charge-ledger-service';
import type { AuthenticatedMerchant } from '@stablepay/http';
import type { SubscriptionChargeObject } from '@stablepay/ledger-domain';
import {
  type ChargeInput,
  type ChargeQuoteInput,
  type ChargeSubscriptionCommand,
  type ChargeSubscriptionResult,
  type QuoteChargeCommand,
  SUBSCRIPTION_CHARGE_COMMANDS,
  SubscriptionChargesApiModule,
  type SubscriptionChargesUseCases,
} from '@stablepay/subscriptions-api';
import type { ChargeQuoteObject } from '@stablepay/subscriptions-domain';
import { SubscriptionCheckoutsCoreModule, SubscriptionReader } from '@stablepay/subscriptions-service';

/**
 * The gateway's side of the charge use cases. Composed here, in the gateway scope, because it joins two scopes: the
 * command goes to the subscriptions service (owner of the Subscription aggregate, which submits the charge and
 * records its receipt), and the answer is the charge as the charge ledger recorded it (the object its list shows for
 * it, before the list does: SPEC fiat field rule 4), once the subscription read model reflects the charge.
 */
@Injectable()
export class SubscriptionChargesGateway implements SubscriptionChargesUseCases {
  constructor(
    @Inject(CommandClient) private readonly commands: CommandClient,
    @Inject(ChargeLedgerReader) private readonly ledger: ChargeLedgerReader,
    @Inject(SubscriptionReader) private readonly subscriptions: SubscriptionReader,
  ) {}

  quote(
    merchant: AuthenticatedMerchant,
    subscriptionId: string,
    input: ChargeQuoteInput,
  ): Promise<ChargeQuoteObject> {
    const command: QuoteChargeCommand = { commandId: randomUUID(), merchant, subscriptionId, ...input };
    return this.commands.send<ChargeQuoteObject>(
      'subscriptions',
      SUBSCRIPTION_CHARGE_COMMANDS.quote,
      command,
    );
  }

  async charge(
    merchant: AuthenticatedMerchant,
    subscriptionId: string,
    input: ChargeInput,
    idempotencyKey?: string,
  ): Promise<SubscriptionChargeObject> {
    const command: ChargeSubscriptionCommand = {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      subscriptionId,
      ...input,
    };
    const done = await this.commands.send<ChargeSubscriptionResult>(
      'subscriptions',
      SUBSCRIPTION_CHARGE_COMMANDS.charge,
      command,
    );
    // The answer is the charge as the ledger recorded it (its Charge stream: the object the ledger lists, by the
    // same code), without waiting for the ledger's projection to list it (SPEC fiat field rule 4; rule 6 binds the
    // webhooks, whose recorder waits for the row). The subscription read model reflects the charge before the
    // answer (nonce, spend, paused: read-your-writes on the command).
    const [charge] = await Promise.all([
      this.ledger.recorded(done.chargeId, { appended: done.appended === true }),
      this.subscriptions.getAtLeast(subscriptionId, done.revision, { appended: done.appended === true }),
    ]);
    return charge.object;
  }
}

/** POST /subscriptions/:id/charge-quote and /charge. */
export function subscriptionChargesHttpModule(): DynamicModule {
  return SubscriptionChargesApiModule.forRoot({
    imports: [ChargeLedgerCoreModule, SubscriptionCheckoutsCoreModule],
    useCases: SubscriptionChargesGateway,
  });
}
