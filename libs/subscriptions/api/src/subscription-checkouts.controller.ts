import { Body, Controller, Get, HttpCode, Inject, Param, Patch, Post, Query, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import {
  type AuthenticatedMerchant,
  checkedIdempotencyKey,
  CurrentMerchant,
  idempotencyKeyOf,
  QueryParameters,
  requestOrigin,
  requireNoParameters,
} from '@stablepay/http';
import { notFound } from '@stablepay/util';
import { CreateSubscriptionCheckoutDto, toCreateInput } from './create-subscription-checkout.dto';
import { parseSubscriptionCheckoutListQuery, SUBSCRIPTION_CHECKOUT_LIST_PARAMETERS } from './list-query';
import { SUBSCRIPTION_CHECKOUTS, type SubscriptionCheckoutsUseCases } from './subscription-checkouts.port';

const ID = /^schk_[0-9a-z]{26}$/;

// Moved to @stablepay/http (the payments scope builds its hosted links the same way); re-exported for callers.
export { requestOrigin };

function checkId(id: string): string {
  if (!ID.test(id)) throw notFound('subscription_checkout', id);
  return id;
}

@Controller('subscription-checkouts')
export class SubscriptionCheckoutsController {
  constructor(@Inject(SUBSCRIPTION_CHECKOUTS) private readonly useCases: SubscriptionCheckoutsUseCases) {}

  /** Creates an intent; the response includes checkout_url and subscription_options. */
  @Post()
  @HttpCode(201)
  create(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: CreateSubscriptionCheckoutDto,
    @Req() request: FastifyRequest,
  ) {
    // The interceptor has checked the key (1-255 characters) and answers a replay itself; a retry it lets through
    // (the first attempt failed with a 5xx) carries the key's command id on to the owner.
    return this.useCases.create(
      merchant,
      toCreateInput(body),
      requestOrigin(request),
      idempotencyKeyOf(request),
    );
  }

  @Get()
  @QueryParameters(SUBSCRIPTION_CHECKOUT_LIST_PARAMETERS)
  list(@CurrentMerchant() merchant: AuthenticatedMerchant, @Query() query: Record<string, unknown>) {
    const { list, filters } = parseSubscriptionCheckoutListQuery(query);
    return this.useCases.list(merchant, list, filters);
  }

  @Get(':id')
  retrieve(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string) {
    return this.useCases.retrieve(merchant, checkId(id));
  }

  /**
   * Cancels a pending intent (409 subscription_checkout_not_pending otherwise). Takes no parameters. A PATCH is not
   * claimed by the Idempotency-Key interceptor (nothing kept or replayed), but its key names the cancel: a retry
   * after a lost answer is answered the intent its first attempt cancelled.
   */
  @Patch(':id/cancel')
  cancel(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    const key = checkedIdempotencyKey(request);
    requireNoParameters(body);
    return this.useCases.cancel(merchant, checkId(id), key);
  }
}
