import { Body, Controller, HttpCode, Inject, Param, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  type AuthenticatedMerchant,
  CurrentMerchant,
  answerIsNotFinal,
  idempotencyKeyOf,
} from '@stablepay/http';
import { bodyNotAnObject, takesFields, unknownParameter } from '@stablepay/util';
import { checkPaymentId } from '../payments.controller';
import type { SignedActionRequest } from './payment-actions.commands';
import {
  PAYMENT_ACTIONS_USE_CASES,
  type PaymentActionKind,
  type PaymentActionsUseCases,
} from './payment-actions.port';

const FIELDS: Readonly<Record<PaymentActionKind, readonly string[]>> = {
  capture: ['amount', 'deadline', 'signature', 'token', 'epoch'],
  refund: ['amount', 'deadline', 'signature', 'token', 'payer', 'epoch'],
  rescue: ['amount', 'deadline', 'signature', 'token', 'to', 'epoch'],
  recover: [],
  dispute_payer: ['deadline', 'signature', 'payer', 'epoch'],
};

/** The JSON body as an object of the action's known fields (types and values are the owner's preflight's). */
export function actionBody(kind: PaymentActionKind, body: unknown): SignedActionRequest {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw bodyNotAnObject();
  }
  for (const key of Object.keys(body)) {
    if (!FIELDS[kind].includes(key)) {
      throw unknownParameter(
        key,
        kind === 'recover'
          ? 'recover takes no parameters: the destination is the payer attested on chain'
          : takesFields(FIELDS[kind]),
      );
    }
  }
  return body as SignedActionRequest;
}

/**
 * SPEC Endpoints > Payments, the merchant's actions after the deposit (bodies: docs/openapi.yaml). Capture,
 * refund and rescue carry the merchant signer's EIP-712 signature (signCapture / signRefund / signRescue of
 * @stablepay/merchant-sdk), checked before anything is sent; recover takes nothing. Each answers the payment object
 * after the action.
 */
@Controller('payments')
export class PaymentActionsController {
  constructor(@Inject(PAYMENT_ACTIONS_USE_CASES) private readonly useCases: PaymentActionsUseCases) {}

  @Post(':paymentId/capture')
  @HttpCode(200)
  capture(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('paymentId') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    return this.act('capture', merchant, id, body, request);
  }

  @Post(':paymentId/refund')
  @HttpCode(200)
  refund(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('paymentId') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    return this.act('refund', merchant, id, body, request);
  }

  @Post(':paymentId/rescue')
  @HttpCode(200)
  rescue(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('paymentId') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    return this.act('rescue', merchant, id, body, request);
  }

  /**
   * The merchant disputes the payer the deposit attests (a wrong payer: an exchange hot wallet, a bridge relayer),
   * within its challenge period, with its DisputePayer signature (signDisputePayer). The payer is cleared on chain
   * (`payer_status: disputed`); the operator attests the right one.
   */
  @Post(':paymentId/dispute_payer')
  @HttpCode(200)
  disputePayer(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('paymentId') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    return this.act('dispute_payer', merchant, id, body, request);
  }

  /**
   * 202 when the recover is recorded but waits: an abandoned deposit's dust is deployed only once asked, and the
   * recover itself runs after that deploy (the payment shows `recovery_requested_at`).
   */
  @Post(':paymentId/recover')
  @HttpCode(200)
  async recover(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('paymentId') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const answer = await this.useCases.act(
      'recover',
      merchant,
      checkPaymentId(id),
      actionBody('recover', body),
      idempotencyKeyOf(request),
    );
    if (answer.accepted) {
      void reply.status(202);
      // Not the outcome yet: a retry with the same Idempotency-Key asks again (the same request while the deploy is
      // pending, recording nothing twice; the recover itself once deployed).
      answerIsNotFinal(request);
    }
    return answer.object;
  }

  private async act(
    kind: Exclude<PaymentActionKind, 'recover'>,
    merchant: AuthenticatedMerchant,
    id: string,
    body: unknown,
    request: FastifyRequest,
  ) {
    const paymentId = checkPaymentId(id);
    const answer = await this.useCases.act(
      kind,
      merchant,
      paymentId,
      actionBody(kind, body),
      idempotencyKeyOf(request),
    );
    return answer.object;
  }
}
