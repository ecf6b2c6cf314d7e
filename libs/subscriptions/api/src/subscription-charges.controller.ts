import { Body, Controller, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { type AuthenticatedMerchant, CurrentMerchant, idempotencyKeyOf } from '@stablepay/http';
import {
  bodyNotAnObject,
  notFound,
  takesFields,
  tooLargeFault,
  unknownParameter,
  validationError,
} from '@stablepay/util';
import {
  type ChargeInput,
  type ChargeQuoteInput,
  SUBSCRIPTION_CHARGES,
  type SubscriptionChargesUseCases,
} from './subscription-charges.port';

const SUBSCRIPTION_ID = /^0x[0-9a-fA-F]{64}$/;
const DIGITS = /^(0|[1-9][0-9]*)$/;
const SIGNATURE = /^0x[0-9a-fA-F]{130}$/;
const CODE = /^[A-Za-z0-9_-]{1,100}$/;

function checkId(id: string): string {
  if (!SUBSCRIPTION_ID.test(id)) throw notFound('subscription', id);
  return id.toLowerCase();
}

function objectBody(body: unknown, known: readonly string[]): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw bodyNotAnObject();
  for (const key of Object.keys(body))
    if (!known.includes(key)) throw unknownParameter(key, takesFields(known));
  return body as Record<string, unknown>;
}

/** `code`: the error code of a malformed value (the one other routes give the same field, e.g. invalid_deadline). */
function uintString(
  body: Record<string, unknown>,
  name: string,
  required: boolean,
  code?: string,
): string | null {
  const v = body[name];
  const rule = 'a string of digits with no sign, decimal point, separator or leading zero';
  if (v === undefined || v === null) {
    if (required) throw validationError(name, `${name} is required: ${rule}.`, code);
    return null;
  }
  // What is wrong, said as such: 80 digits only the length, "00" or "-5" the shape (both were told "must be a
  // non-negative integer string", which "00" and the 80 digits are). Past 2^256 - 1 no signature can cover it: the
  // charge was refused as invalid_signature, naming the wrong field.
  const tooLarge = tooLargeFault(name, v);
  if (tooLarge !== null) throw validationError(name, tooLarge, code);
  if (typeof v !== 'string' || !DIGITS.test(v)) throw validationError(name, `${name} must be ${rule}.`, code);
  return v;
}

/**
 * `deadline`: Unix seconds as a JSON integer (at most 2^53 - 1, the schema's maximum: a larger number is not read
 * exactly) or a string of digits. A number that is none of these is told so: it was told "must be a string of
 * digits", as if numbers were not taken.
 */
function chargeDeadline(body: Record<string, unknown>): string | null {
  const value = body['deadline'];
  if (typeof value !== 'number') return uintString(body, 'deadline', true, 'invalid_deadline');
  if (Number.isSafeInteger(value) && value >= 0) return String(value);
  throw validationError(
    'deadline',
    tooLargeFault('deadline', value) ??
      tooLargeFault('deadline', value, BigInt(Number.MAX_SAFE_INTEGER)) ??
      'deadline must be Unix seconds: a non-negative integer, or a string of digits without a leading zero.',
    'invalid_deadline',
  );
}

/** SPEC Endpoints > Subscriptions: quote the next charge, and charge (merchant-signed with signCharge). */
@Controller('subscriptions/:id')
export class SubscriptionChargesController {
  constructor(@Inject(SUBSCRIPTION_CHARGES) private readonly useCases: SubscriptionChargesUseCases) {}

  /**
   * Body (optional): `fiat_amount` (minor units, integer string: an ad-hoc amount instead of the plan price) and
   * `currency` (ISO-4217; needed with fiat_amount on a token-priced plan).
   */
  @Post('charge-quote')
  @HttpCode(201)
  quote(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string, @Body() raw: unknown) {
    const subscriptionId = checkId(id);
    const body = objectBody(raw, ['fiat_amount', 'currency']);
    const currency = body.currency;
    if (currency !== undefined && currency !== null && typeof currency !== 'string')
      throw validationError('currency', 'currency must be an ISO-4217 code such as USD.');
    const input: ChargeQuoteInput = {
      fiatAmount: uintString(body, 'fiat_amount', false),
      currency: typeof currency === 'string' ? currency : null,
    };
    return this.useCases.quote(merchant, subscriptionId, input);
  }

  /**
   * Body: `amount` (token smallest units), `nonce` (the subscription's charge_nonce), `deadline` (unix seconds),
   * `signature` (signCharge's), and `quote_code` for a fiat-priced plan (or whenever a quote was signed).
   */
  @Post('charge')
  @HttpCode(200)
  charge(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Body() raw: unknown,
    @Req() request: FastifyRequest,
  ) {
    const subscriptionId = checkId(id);
    const body = objectBody(raw, ['amount', 'nonce', 'deadline', 'signature', 'quote_code']);
    // The codes every signed route gives these fields (payments, settings, payouts), not parameter_invalid.
    const amount = uintString(body, 'amount', true, 'invalid_amount') ?? '0';
    const nonce = body.nonce;
    if (typeof nonce !== 'number' || !Number.isSafeInteger(nonce) || nonce < 0)
      throw validationError(
        'nonce',
        "nonce must be the subscription's charge_nonce (a non-negative integer).",
      );
    const deadline = chargeDeadline(body);
    const signature = body.signature;
    if (typeof signature !== 'string' || !SIGNATURE.test(signature))
      throw validationError(
        'signature',
        'signature must be the 65-byte 0x-hex signature of signCharge.',
        'invalid_signature',
      );
    const quoteCode = body.quote_code;
    if (
      quoteCode !== undefined &&
      quoteCode !== null &&
      (typeof quoteCode !== 'string' || !CODE.test(quoteCode))
    )
      throw validationError(
        'quote_code',
        'quote_code must be the code of POST /subscriptions/:id/charge-quote.',
      );
    const input: ChargeInput = {
      amount,
      nonce,
      deadline: deadline ?? '0',
      signature,
      quoteCode: typeof quoteCode === 'string' ? quoteCode : null,
    };
    return this.useCases.charge(merchant, subscriptionId, input, idempotencyKeyOf(request));
  }
}
