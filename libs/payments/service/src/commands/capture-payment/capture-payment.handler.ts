import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  PAYMENT_ACTION_COMMANDS,
  type PaymentActionCommand,
  type PaymentActionResult,
} from '@stablepay/payments-api';
import { PaymentActions } from '../../actions/payment-actions';

/** Use case: the merchant captures (part of) a TWO_STEP escrow to its settlement address (POST /payments/:paymentId/capture). Signed; preflighted against the chain before anything is sent. */
@Controller()
export class CapturePaymentHandler {
  constructor(@Inject(PaymentActions) private readonly actions: PaymentActions) {}

  @CommandHandler(PAYMENT_ACTION_COMMANDS.capture)
  handle(@Payload() command: PaymentActionCommand): Promise<PaymentActionResult> {
    return this.actions.capture(command.merchant, command.paymentId, command.body, command.commandId);
  }
}
