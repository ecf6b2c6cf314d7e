import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type CancelSubscriptionCommand,
  SUBSCRIPTION_COMMANDS,
  type SubscriptionCommandResult,
} from '@stablepay/subscriptions-api';
import { MerchantCancel } from '../../subscriptions/merchant-cancel';

/** Use case: merchant cancel (POST /subscriptions/:id/cancel, signed with signCancelSubscription). */
@Controller()
export class CancelSubscriptionHandler {
  constructor(@Inject(MerchantCancel) private readonly cancel: MerchantCancel) {}

  @CommandHandler(SUBSCRIPTION_COMMANDS.cancel)
  handle(@Payload() command: CancelSubscriptionCommand): Promise<SubscriptionCommandResult> {
    return this.cancel.handle(command);
  }
}
