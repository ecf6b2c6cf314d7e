import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type CancelCheckoutCommand,
  CHECKOUT_COMMANDS,
  type CheckoutCommandResult,
} from '@stablepay/payments-api';
import { PaymentCommands } from '../../payments/payment.commands';
import { PaymentReader } from '../../payments/payment.reader';

/** Use case: the merchant cancels a pending checkout with no deposit (POST /checkouts/:id/cancel). */
@Controller()
export class CancelCheckoutHandler {
  constructor(
    @Inject(PaymentCommands) private readonly commands: PaymentCommands,
    @Inject(PaymentReader) private readonly reader: PaymentReader,
  ) {}

  @CommandHandler(CHECKOUT_COMMANDS.cancel)
  async handle(@Payload() command: CancelCheckoutCommand): Promise<CheckoutCommandResult> {
    // Ownership first: another merchant's id is as unknown as a made-up one.
    const checkout = await this.reader.getOwnedCheckout(command.merchant, command.id);
    const done = await this.commands.run(
      { id: checkout.payment_id, merchant_id: checkout.merchant_id, mode: checkout.mode },
      { type: 'Cancel' },
      command.commandId,
    );
    return { checkoutId: checkout.id, paymentId: checkout.payment_id, revision: done.revision };
  }
}
