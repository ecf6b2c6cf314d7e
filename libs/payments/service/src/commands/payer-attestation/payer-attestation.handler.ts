import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  PAYMENT_OPERATOR_COMMANDS,
  type PayerAttestationCommand,
  type PayerAttestationResult,
} from '@stablepay/payments-api';
import { PaymentActions } from '../../actions/payment-actions';

/**
 * Use case: the operator prepares the attestation of the right payer after a merchant dispute (POST
 * /admin/merchants/:merchantId/payments/:id/payer-attestations): the `attestPayer` call for the registry admin's
 * cold key. Nothing is sent; the indexer records the PayerAttested log.
 */
@Controller()
export class PayerAttestationHandler {
  constructor(@Inject(PaymentActions) private readonly actions: PaymentActions) {}

  @CommandHandler(PAYMENT_OPERATOR_COMMANDS.payerAttestation)
  handle(@Payload() command: PayerAttestationCommand): Promise<PayerAttestationResult> {
    return this.actions.payerAttestation(command.merchantId, command.paymentId, command.body);
  }
}
