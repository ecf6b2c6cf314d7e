import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  PAYMENT_ACTION_COMMANDS,
  type PaymentActionCommand,
  type PaymentActionResult,
} from '@stablepay/payments-api';
import { PaymentActions } from '../../actions/payment-actions';

/**
 * Use case: payer-owned funds go back to the payer attested on chain (POST /payments/:paymentId/recover): recover
 * (over-deposit, abandoned) or, for a TWO_STEP escrow past its authorization expiry, reclaim. No destination is
 * taken from the request.
 */
@Controller()
export class RecoverPaymentHandler {
  constructor(@Inject(PaymentActions) private readonly actions: PaymentActions) {}

  @CommandHandler(PAYMENT_ACTION_COMMANDS.recover)
  handle(@Payload() command: PaymentActionCommand): Promise<PaymentActionResult> {
    return this.actions.recover(command.merchant, command.paymentId, command.commandId);
  }
}
