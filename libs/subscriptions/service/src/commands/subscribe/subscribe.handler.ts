import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type SubscribeCommand,
  type SubscribeCommandResult,
  SUBSCRIPTION_COMMANDS,
} from '@stablepay/subscriptions-api';
import { SubscribeFlow } from '../../subscriptions/subscribe-flow';

/** Use case: the hosted page's subscribe call (POST /subscription-checkouts/:id/subscribe), authorize or report. */
@Controller()
export class SubscribeHandler {
  constructor(@Inject(SubscribeFlow) private readonly flow: SubscribeFlow) {}

  @CommandHandler(SUBSCRIPTION_COMMANDS.subscribe)
  handle(@Payload() command: SubscribeCommand): Promise<SubscribeCommandResult> {
    return this.flow.handle(command);
  }
}
