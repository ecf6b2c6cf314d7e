import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  PAYMENT_ACTION_COMMANDS,
  type PaymentActionCommand,
  type PaymentActionResult,
} from '@stablepay/payments-api';
import { PaymentActions } from '../../actions/payment-actions';

/** Use case: the merchant disputes the payer the deposit attests (POST /payments/:paymentId/dispute_payer). Signed; preflighted against the chain before anything is sent. */
@Controller()
export class DisputePayerHandler {
  constructor(@Inject(PaymentActions) private readonly actions: PaymentActions) {}

  @CommandHandler(PAYMENT_ACTION_COMMANDS.dispute_payer)
  handle(@Payload() command: PaymentActionCommand): Promise<PaymentActionResult> {
    return this.actions.disputePayer(command.merchant, command.paymentId, command.body, command.commandId);
  }
}
