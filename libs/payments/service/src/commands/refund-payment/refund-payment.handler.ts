import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  PAYMENT_ACTION_COMMANDS,
  type PaymentActionCommand,
  type PaymentActionResult,
} from '@stablepay/payments-api';
import { PaymentActions } from '../../actions/payment-actions';

/** Use case: the merchant refunds (part of) a TWO_STEP escrow to the attested payer (POST /payments/:paymentId/refund). Signed; preflighted against the chain before anything is sent. */
@Controller()
export class RefundPaymentHandler {
  constructor(@Inject(PaymentActions) private readonly actions: PaymentActions) {}

  @CommandHandler(PAYMENT_ACTION_COMMANDS.refund)
  handle(@Payload() command: PaymentActionCommand): Promise<PaymentActionResult> {
    return this.actions.refund(command.merchant, command.paymentId, command.body, command.commandId);
  }
}
