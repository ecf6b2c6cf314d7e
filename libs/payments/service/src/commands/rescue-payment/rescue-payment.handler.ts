import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  PAYMENT_ACTION_COMMANDS,
  type PaymentActionCommand,
  type PaymentActionResult,
} from '@stablepay/payments-api';
import { PaymentActions } from '../../actions/payment-actions';

/** Use case: the merchant rescues another token or the native coin from the deposit (POST /payments/:paymentId/rescue). Signed; preflighted against the chain before anything is sent. */
@Controller()
export class RescuePaymentHandler {
  constructor(@Inject(PaymentActions) private readonly actions: PaymentActions) {}

  @CommandHandler(PAYMENT_ACTION_COMMANDS.rescue)
  handle(@Payload() command: PaymentActionCommand): Promise<PaymentActionResult> {
    return this.actions.rescue(command.merchant, command.paymentId, command.body, command.commandId);
  }
}
