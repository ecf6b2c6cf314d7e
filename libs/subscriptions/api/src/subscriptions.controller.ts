import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  answerIsNotFinal,
  assertOwnMerchant,
  type AuthenticatedMerchant,
  CurrentMerchant,
  idempotencyKeyOf,
  IgnoreQueryParameters,
  PAGINATION_PARAMETERS,
  parseListQuery,
  Public,
  QueryParameters,
  subscriptionsUseSubscriptionCheckouts,
} from '@stablepay/http';
import { parseAddress } from '@stablepay/evm';
import {
  parseSubscriptionListFilters,
  SUBSCRIPTION_FILTER_PARAMETERS,
  type SubscriptionListFilters,
} from '@stablepay/subscriptions-domain';
import {
  bodyNotAnObject,
  fieldFault,
  notFound,
  takesFields,
  tooLargeFault,
  unknownParameter,
  validationError,
} from '@stablepay/util';
import {
  type CancelSubscriptionInput,
  type SubscribeInput,
  SUBSCRIPTIONS_USE_CASES,
  type SubscriptionsUseCases,
} from './subscriptions.port';
import { SubscribeReportLimits } from './subscribe-report-limits';

const CHECKOUT_ID = /^schk_[0-9a-z]{26}$/;
const SUBSCRIPTION_ID = /^0x[0-9a-fA-F]{64}$/;
const TX_HASH = /^0x[0-9a-fA-F]{64}$/;

function objectBody(body: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body))
    throw bodyNotAnObject();
  for (const key of Object.keys(body))
    if (!allowed.includes(key)) throw unknownParameter(key, takesFields(allowed));
  return body as Record<string, unknown>;
}

function requiredString(
  body: Record<string, unknown>,
  name: string,
  pattern?: RegExp,
  what?: string,
): string {
  const value = body[name];
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > 200 ||
    (pattern && !pattern.test(value))
  )
    throw validationError(name, fieldFault(name, value, what ?? 'a string of 1 to 200 characters'));
  return value;
}

/** The subscribe body (docs/openapi.yaml SubscribeRequest); which chain and token are offered is the service's check. */
export function parseSubscribeBody(body: unknown): SubscribeInput {
  const b = objectBody(body, ['chain', 'asset', 'subscriber', 'tx_hash']);
  const input: SubscribeInput = {
    chain: requiredString(b, 'chain', /^eip155:[1-9][0-9]{0,15}$/, 'a CAIP-2 chain id such as eip155:8453'),
    asset: requiredString(b, 'asset', undefined, 'the CAIP-19 asset of a subscription_options entry'),
    // The subscriber signs the approval and pays every charge: the zero address has no key to do either.
    subscriber: parseAddress(b['subscriber'], 'subscriber', { nonZero: true }),
  };
  if (b['tx_hash'] === undefined || b['tx_hash'] === null) return input;
  return {
    ...input,
    txHash: requiredString(
      b,
      'tx_hash',
      TX_HASH,
      'a 32-byte transaction hash (0x followed by 64 hex digits)',
    ).toLowerCase(),
  };
}

/** The merchant cancel body: what signCancelSubscription signed. */
export function parseCancelBody(body: unknown): CancelSubscriptionInput {
  const b = objectBody(body, ['nonce', 'deadline', 'signature']);
  const nonce = b['nonce'];
  if (typeof nonce !== 'number' || !Number.isSafeInteger(nonce) || nonce < 0)
    throw validationError(
      'nonce',
      fieldFault('nonce', nonce, "the subscription's current charge_nonce (a non-negative integer)"),
    );
  const deadline = b['deadline'];
  if (typeof deadline !== 'number' || !Number.isSafeInteger(deadline) || deadline <= 0)
    throw validationError(
      'deadline',
      tooLargeFault('deadline', deadline, BigInt(Number.MAX_SAFE_INTEGER)) ??
        fieldFault('deadline', deadline, 'the Unix seconds the signature names (a positive integer)'),
      // The code every signed-action route gives a malformed deadline (payments, settings, payouts).
      'invalid_deadline',
    );
  const signature = b['signature'];
  if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature))
    throw validationError(
      'signature',
      fieldFault('signature', signature, 'a 65-byte 0x-hex signature'),
      'invalid_signature',
    );
  return { nonce, deadline, signature };
}

/** GET /merchants/:merchantId/subscriptions's query parameters (any other is refused: QueryParameters). */
const SUBSCRIPTION_LIST_PARAMETERS = [...PAGINATION_PARAMETERS, ...SUBSCRIPTION_FILTER_PARAMETERS];

export function parseSubscriptionListQuery(query: Record<string, unknown>): {
  list: ReturnType<typeof parseListQuery>;
  filters: SubscriptionListFilters;
} {
  return { list: parseListQuery(query), filters: parseSubscriptionListFilters(query) };
}

function checkSubscriptionId(id: string): string {
  if (!SUBSCRIPTION_ID.test(id)) throw notFound('subscription', id);
  return id.toLowerCase();
}

/**
 * The subscribe call, shared by `POST /subscription-checkouts/:id/subscribe` and the hosted page's own-origin copy: a
 * report (`tx_hash` given) runs within SubscribeReportLimits, one budget for both routes; an authorization reads no
 * receipt and is not bounded there. A report not mined in time is 202.
 */
export async function subscribeCall(
  useCases: SubscriptionsUseCases,
  limits: SubscribeReportLimits,
  id: string,
  body: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  if (!CHECKOUT_ID.test(id)) throw notFound('subscription_checkout', id);
  const input = parseSubscribeBody(body);
  const release = input.txHash !== undefined ? await limits.admit(request, reply, id) : undefined;
  try {
    const result = await useCases.subscribe(id, input);
    if (result.object === 'subscribe_result' && result.status === 'pending') {
      void reply.status(202);
      // Not mined yet: a retry with the same Idempotency-Key asks again and learns the outcome.
      answerIsNotFinal(request);
    }
    return result;
  } finally {
    await release?.();
  }
}

/** The subscribe call of the hosted page (public: the intent id is the customer's capability). */
@Public()
@Controller('subscription-checkouts')
export class SubscribeController {
  constructor(
    @Inject(SUBSCRIPTIONS_USE_CASES) private readonly useCases: SubscriptionsUseCases,
    @Inject(SubscribeReportLimits) private readonly reportLimits: SubscribeReportLimits,
  ) {}

  @Post(':id/subscribe')
  @HttpCode(200)
  async subscribe(
    @Param('id') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return subscribeCall(this.useCases, this.reportLimits, id, body, request, reply);
  }
}

@Controller()
export class SubscriptionsController {
  constructor(@Inject(SUBSCRIPTIONS_USE_CASES) private readonly useCases: SubscriptionsUseCases) {}

  /**
   * SPEC: "There is no POST /subscriptions", yet its older listing shows `POST /subscriptions` and a
   * `GET /subscriptions` list; a client following it here would get a bare 404 `route_not_found` and no way forward.
   * Answered as under the payment-request prefix (410 naming the routes to use), whatever query the old list sent.
   */
  @Get('subscriptions')
  @IgnoreQueryParameters()
  listMoved(): never {
    throw subscriptionsUseSubscriptionCheckouts();
  }

  @Post('subscriptions')
  createMoved(): never {
    throw subscriptionsUseSubscriptionCheckouts();
  }

  @Get('subscriptions/:id')
  retrieve(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string) {
    return this.useCases.retrieve(merchant, checkSubscriptionId(id));
  }

  @Get('merchants/:merchantId/subscriptions')
  @QueryParameters(SUBSCRIPTION_LIST_PARAMETERS)
  list(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('merchantId') merchantId: string,
    @Query() query: Record<string, unknown>,
  ) {
    assertOwnMerchant(merchant, merchantId);
    const { list, filters } = parseSubscriptionListQuery(query);
    return this.useCases.list(merchant, list, filters);
  }

  /** Merchant cancel, signed with signCancelSubscription. */
  @Post('subscriptions/:id/cancel')
  @HttpCode(200)
  cancel(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    return this.useCases.cancel(
      merchant,
      checkSubscriptionId(id),
      parseCancelBody(body),
      idempotencyKeyOf(request),
    );
  }
}
