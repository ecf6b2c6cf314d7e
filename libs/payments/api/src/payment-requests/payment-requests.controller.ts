import { Body, Controller, Get, HttpCode, Inject, Param, Post, Req, UseGuards } from '@nestjs/common';
import { IsOptional, IsString } from 'class-validator';
import type { FastifyRequest } from 'fastify';
import {
  type AuthenticatedMerchant,
  CurrentMerchant,
  idempotencyKeyOf,
  Public,
  requestOrigin,
} from '@stablepay/http';
import { CreateCheckoutDto, toCreateCheckoutInput } from '../create-checkout.dto';
import { checkPaymentId } from '../payments.controller';
import { PAYMENTS_USE_CASES, type PaymentsUseCases } from '../payments.port';
import { XApiKeyGuard } from './x-api-key.guard';

/**
 * `{payment_request_base_url}` = `{base_url}/payment-requests` (ours: SPEC names no address; under the same
 * origin its paths would collide with the main surface's `/payments/:paymentId`).
 */
export const PAYMENT_REQUEST_PREFIX = 'payment-requests';

/** POST /payment-requests/payments/configure/:paymentId. */
export class ConfigurePaymentDto {
  @IsOptional()
  @IsString({ message: 'chain must be a CAIP-2 chain id such as eip155:8453' })
  chain?: string;

  @IsOptional()
  @IsString({ message: 'token must be a token symbol such as USDC' })
  token?: string;
}

/**
 * SPEC Endpoints > Alternate payment-request surface: create (answers the `url` to send the customer to),
 * configure token and chain, details, status; authenticated by `x-api-key`; the same Payment aggregate as
 * /checkouts (a payment request is a checkout whose customer is sent to `url`).
 */
@Public()
@UseGuards(XApiKeyGuard)
@Controller(`${PAYMENT_REQUEST_PREFIX}/payments`)
export class PaymentRequestsController {
  constructor(@Inject(PAYMENTS_USE_CASES) private readonly useCases: PaymentsUseCases) {}

  @Post('new')
  @HttpCode(201)
  create(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: CreateCheckoutDto,
    @Req() request: FastifyRequest,
  ) {
    return this.useCases.createPaymentRequest(
      merchant,
      toCreateCheckoutInput(body),
      requestOrigin(request),
      idempotencyKeyOf(request),
    );
  }

  @Post('configure/:paymentId')
  @HttpCode(200)
  configure(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('paymentId') id: string,
    @Body() body: ConfigurePaymentDto,
  ) {
    return this.useCases.configurePaymentRequest(merchant, checkPaymentId(id), {
      chain: body.chain,
      token: body.token,
    });
  }

  @Get(':paymentId')
  retrieve(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('paymentId') id: string) {
    return this.useCases.retrievePaymentRequest(merchant, checkPaymentId(id));
  }

  @Get(':paymentId/status')
  status(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('paymentId') id: string) {
    return this.useCases.paymentRequestStatus(merchant, checkPaymentId(id));
  }
}
