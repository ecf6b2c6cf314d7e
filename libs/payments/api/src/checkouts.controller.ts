import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import {
  type AuthenticatedMerchant,
  CurrentMerchant,
  idempotencyKeyOf,
  QueryParameters,
  requestOrigin,
  requireNoParameters,
} from '@stablepay/http';
import { notFound } from '@stablepay/util';
import { CreateCheckoutDto, toCreateCheckoutInput } from './create-checkout.dto';
import { CHECKOUT_ID, CHECKOUT_LIST_PARAMETERS, parseCheckoutListQuery } from './list-query';
import { PAYMENTS_USE_CASES, type PaymentsUseCases } from './payments.port';

/** A malformed id is as unknown as a made-up one: 404 before anything runs. */
export function checkCheckoutId(id: string): string {
  if (!CHECKOUT_ID.test(id)) throw notFound('checkout', id);
  return id;
}

/** SPEC Endpoints > Checkouts. Bodies are ours (SPEC: "not shown"), in docs/openapi.yaml. */
@Controller('checkouts')
export class CheckoutsController {
  constructor(@Inject(PAYMENTS_USE_CASES) private readonly useCases: PaymentsUseCases) {}

  /** Creates a checkout and its payment; the response carries checkout_url and deposit_address. */
  @Post()
  @HttpCode(201)
  create(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: CreateCheckoutDto,
    @Req() request: FastifyRequest,
  ) {
    // The interceptor answers a replayed key itself; a retry it lets through carries the key on to the owner.
    return this.useCases.createCheckout(
      merchant,
      toCreateCheckoutInput(body),
      requestOrigin(request),
      idempotencyKeyOf(request),
    );
  }

  @Get()
  @QueryParameters(CHECKOUT_LIST_PARAMETERS)
  list(@CurrentMerchant() merchant: AuthenticatedMerchant, @Query() query: Record<string, unknown>) {
    const { list, filters } = parseCheckoutListQuery(query);
    return this.useCases.listCheckouts(merchant, list, filters);
  }

  @Get(':id')
  retrieve(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string) {
    return this.useCases.retrieveCheckout(merchant, checkCheckoutId(id));
  }

  /** Cancels a pending checkout with no deposit (409 otherwise); emits payment.cancelled. */
  @Post(':id/cancel')
  @HttpCode(200)
  cancel(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    requireNoParameters(body);
    return this.useCases.cancelCheckout(merchant, checkCheckoutId(id), idempotencyKeyOf(request));
  }
}
