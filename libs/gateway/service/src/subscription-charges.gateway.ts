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
 * records its receipt), and the answer is the charge ledger's row, read once the ledger lists it (read-your-writes
 * across the two services: SPEC "persist the receipt synchronously" and fiat field rule 6).
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
    // Both read models the merchant reads next reflect the charge: the subscription (nonce, spend, paused) and the
    // ledger's row.
    const [row] = await Promise.all([
      this.ledger.getAtLeast(done.chargeId, 0, { appended: done.appended === true }),
      this.subscriptions.getAtLeast(subscriptionId, done.revision, { appended: done.appended === true }),
    ]);
    return row.object;
  }
}

/** POST /subscriptions/:id/charge-quote and /charge. */
export function subscriptionChargesHttpModule(): DynamicModule {
  return SubscriptionChargesApiModule.forRoot({
    imports: [ChargeLedgerCoreModule, SubscriptionCheckoutsCoreModule],
    useCases: SubscriptionChargesGateway,
  });
}
