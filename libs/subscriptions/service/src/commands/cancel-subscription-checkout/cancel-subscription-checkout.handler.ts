import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type CancelSubscriptionCheckoutCommand,
  SUBSCRIPTION_CHECKOUT_COMMANDS,
  type SubscriptionCheckoutCommandResult,
} from '@stablepay/subscriptions-api';
import { SubscriptionCheckoutCommands } from '../../subscription-checkouts/subscription-checkout.commands';
import { SubscriptionCheckoutReader } from '../../subscription-checkouts/subscription-checkout.reader';

/** Use case: the merchant cancels a pending intent (PATCH /subscription-checkouts/:id/cancel). */
@Controller()
export class CancelSubscriptionCheckoutHandler {
  constructor(
    @Inject(SubscriptionCheckoutCommands) private readonly commands: SubscriptionCheckoutCommands,
    @Inject(SubscriptionCheckoutReader) private readonly reader: SubscriptionCheckoutReader,
  ) {}

  @CommandHandler(SUBSCRIPTION_CHECKOUT_COMMANDS.cancel)
  async handle(
    @Payload() command: CancelSubscriptionCheckoutCommand,
  ): Promise<SubscriptionCheckoutCommandResult> {
    // Ownership first: another merchant's id is as unknown as a made-up one.
    const row = await this.reader.getOwned(command.merchant.merchantId, command.id);
    const { id, revision } = await this.commands.cancel(row, 'merchant', command.commandId);
    return { id, revision };
  }
}
