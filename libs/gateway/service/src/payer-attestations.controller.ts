import { Body, Controller, HttpCode, Inject, Param, Post, UseGuards } from '@nestjs/common';
import { CommandClient } from '@stablepay/commands';
import { Public } from '@stablepay/http';
import { AdminTokenGuard } from '@stablepay/merchants-api';
import {
  checkPaymentId,
  PAYMENT_OPERATOR_COMMANDS,
  type PayerAttestationCommand,
  type PayerAttestationResult,
} from '@stablepay/payments-api';
import { notFound } from '@stablepay/util';

const MERCHANT_ID = /^mer_[0-9a-z]{1,64}$/;

/**
 * Operator API: the attestation of a payment's payer after the merchant disputed it (POST
 * /payments/:paymentId/dispute_payer). PaymentDeposit.attestPayer passes only from the registry admin's cold key,
 * which never reaches a service, so this answers the call for that key to sign and send (`to`, `data`, `chain_id`);
 * the deposit's PayerAttested log, observed by the indexer, then records the payer on the payment
 * (docs/payments.md, "Disputing the payer"). Another merchant's payment is 404; 409 `payer_not_disputed` while a
 * payer stands.
 */
@Public()
@UseGuards(AdminTokenGuard)
@Controller('admin/merchants/:merchantId')
export class PayerAttestationsController {
  constructor(@Inject(CommandClient) private readonly commands: CommandClient) {}

  @Post('payments/:id/payer-attestations')
  @HttpCode(200)
  async attest(@Param('merchantId') merchantId: string, @Param('id') id: string, @Body() body: unknown) {
    const paymentId = checkPaymentId(id);
    // An unknown merchant cannot own the payment: the same 404 as another merchant's.
    if (!MERCHANT_ID.test(merchantId)) throw notFound('payment', paymentId);
    const command: PayerAttestationCommand = { merchantId, paymentId, body: body ?? null };
    const answer = await this.commands.send<PayerAttestationResult>(
      'payments',
      PAYMENT_OPERATOR_COMMANDS.payerAttestation,
      command,
    );
    return {
      object: 'payer_attestation' as const,
      merchant_id: merchantId,
      payment_id: paymentId,
      payer: answer.payer,
      chain: answer.chain,
      chain_id: answer.chain.split(':')[1] ?? null,
      from: answer.admin,
      to: answer.to,
      data: answer.data,
    };
  }
}
