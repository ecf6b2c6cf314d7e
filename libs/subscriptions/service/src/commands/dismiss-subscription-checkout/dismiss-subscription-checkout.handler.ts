import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type DismissSubscriptionCheckoutCommand,
  SUBSCRIPTION_CHECKOUT_COMMANDS,
  type SubscriptionCheckoutCommandResult,
} from '@stablepay/subscriptions-api';
import { DomainError } from '@stablepay/util';
import { SubscriptionCheckoutCommands } from '../../subscription-checkouts/subscription-checkout.commands';
import { SubscriptionCheckoutReader } from '../../subscription-checkouts/subscription-checkout.reader';

/**
 * Use case: the customer dismissed the hosted page (POST /hosted/subscribe/:id/dismiss). Cancels a pending
 * intent; answers null when there was nothing to cancel (unknown, or no longer pending).
 */
@Controller()
export class DismissSubscriptionCheckoutHandler {
  constructor(
    @Inject(SubscriptionCheckoutCommands) private readonly commands: SubscriptionCheckoutCommands,
    @Inject(SubscriptionCheckoutReader) private readonly reader: SubscriptionCheckoutReader,
  ) {}

  @CommandHandler(SUBSCRIPTION_CHECKOUT_COMMANDS.dismiss)
  async handle(
    @Payload() command: DismissSubscriptionCheckoutCommand,
  ): Promise<SubscriptionCheckoutCommandResult | null> {
    const row = await this.reader.find(command.id);
    if (!row || row.status !== 'pending') return null;
    try {
      const { id, revision } = await this.commands.cancel(row, 'customer', command.commandId);
      return { id, revision };
    } catch (error) {
      // Completed, cancelled or expired meanwhile: the page shows that state.
      if (error instanceof DomainError && error.code === 'subscription_checkout_not_pending') return null;
      throw error;
    }
  }
}
