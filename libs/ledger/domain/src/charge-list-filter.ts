import { parseAddress, parseChainFilter } from '@stablepay/evm';
import { parseTimeBound, validationError } from '@stablepay/util';
import type { SubscriptionChargeObject } from './charge';

/**
 * `GET /merchants/:merchantId/charges` filters (SPEC: by subscription, subscriber, date range, status, chain; names
 * other than `status`: not shown, ours): `subscription_id`, `subscriber`, `status` (`succeeded`/`failed`), `chain`
 * (CAIP-2), and `charged_from` (inclusive) / `charged_to` (exclusive) on `charged_at` (block time on success,
 * submission time on failure: when the money moved or was attempted, which is what a billing team reconciles on),
 * in the forms every list's time bounds take (parseTimeBound).
 */
export interface ChargeListFilter {
  readonly subscriptionId?: string;
  readonly subscriber?: string;
  readonly status?: 'succeeded' | 'failed';
  readonly chain?: string;
  readonly chargedFrom?: Date;
  readonly chargedTo?: Date;
}

/** The filter parameters of the charges list and the subscription charges export (paging aside). */
export const CHARGE_FILTER_PARAMETERS: readonly string[] = [
  'subscription_id',
  'subscriber',
  'status',
  'chain',
  'charged_from',
  'charged_to',
];

const BYTES32 = /^0x[0-9a-fA-F]{64}$/;

/** Query parameters as received (strings); unknown parameters are the controller's concern. Ids compare lower case. */
export function parseChargeListFilter(query: Readonly<Record<string, unknown>>): ChargeListFilter {
  const filter: {
    -readonly [K in keyof ChargeListFilter]: ChargeListFilter[K];
  } = {};
  // Repeated filters are refused (Fastify hands a repeated parameter as an array).
  for (const name of CHARGE_FILTER_PARAMETERS) {
    const value = query[name];
    if (value !== undefined && typeof value !== 'string')
      throw validationError(name, `${name} must be given once.`);
  }
  const { subscription_id, subscriber, status, chain, charged_from, charged_to } = query;
  if (subscription_id !== undefined) {
    if (typeof subscription_id !== 'string' || !BYTES32.test(subscription_id))
      throw validationError(
        'subscription_id',
        'subscription_id must be a 32-byte hex string (0x + 64 hex digits).',
      );
    filter.subscriptionId = subscription_id.toLowerCase();
  }
  // A mixed-case address with a bad EIP-55 checksum is a typo (400), not a wallet with no charges.
  if (subscriber !== undefined) filter.subscriber = parseAddress(subscriber, 'subscriber').toLowerCase();
  if (status !== undefined) {
    if (status !== 'succeeded' && status !== 'failed')
      throw validationError('status', "status must be 'succeeded' or 'failed'.");
    filter.status = status;
  }
  if (chain !== undefined) filter.chain = parseChainFilter(chain, 'chain');
  if (charged_from !== undefined) filter.chargedFrom = parseTimeBound(charged_from, 'charged_from');
  if (charged_to !== undefined) filter.chargedTo = parseTimeBound(charged_to, 'charged_to');
  if (filter.chargedFrom && filter.chargedTo && filter.chargedFrom >= filter.chargedTo)
    throw validationError('charged_to', 'charged_to must be after charged_from.');
  return filter;
}

/** The same filter in memory (the read model applies it in SQL; this is its reference). */
export function chargeMatches(filter: ChargeListFilter, charge: SubscriptionChargeObject): boolean {
  const chargedAt = Date.parse(charge.charged_at);
  return (
    (filter.subscriptionId === undefined || charge.subscription_id.toLowerCase() === filter.subscriptionId) &&
    (filter.subscriber === undefined || charge.subscriber.toLowerCase() === filter.subscriber) &&
    (filter.status === undefined || charge.status === filter.status) &&
    (filter.chain === undefined || charge.chain === filter.chain) &&
    (filter.chargedFrom === undefined || chargedAt >= filter.chargedFrom.getTime()) &&
    (filter.chargedTo === undefined || chargedAt < filter.chargedTo.getTime())
  );
}
