import { randomBytes } from 'node:crypto';
import {
  convertAtRate,
  type RateSource,
  rateFor,
  settlementProviderUnavailable,
} from '@stablepay/subscriptions-domain';
import type { Clock } from '@stablepay/util';

/** What a fiat-settled charge-quote asks the settlement provider for: a price it will honour at off-ramp. */
export interface PriceLockRequest {
  readonly merchantId: string;
  readonly fiatAmount: bigint;
  readonly currency: string;
  readonly tokenSymbol: string;
  readonly tokenDecimals: number;
  readonly chain: string;
}

export interface PriceLock {
  /** SPEC `price_lock_code`: the provider's code, redeemed at off-ramp after the charge. */
  readonly priceLockCode: string;
  readonly tokenAmount: bigint;
  /** Currency major units per whole token the lock converts at. */
  readonly rate: string;
  readonly expiresAt: Date;
}

/** The settlement provider port (fiat off-ramp). Adapters: the sandbox below; a real provider plugs in behind it. */
export interface SettlementProvider {
  lockPrice(request: PriceLockRequest): Promise<PriceLock>;
  /**
   * Gives back a lock the merchant never received (the quote was refused or not stored after the lock), so the
   * provider does not hold that price until it expires. Releasing a lock already gone is not an error.
   */
  releasePriceLock(request: { readonly merchantId: string; readonly priceLockCode: string }): Promise<void>;
}

export const SETTLEMENT_PROVIDER = Symbol('SETTLEMENT_PROVIDER');

/** How long a sandbox price lock holds (real providers name their own expiry). */
export const SANDBOX_PRICE_LOCK_TTL_SECONDS = 600;
/** Magic value: a fiat amount of exactly 503 minor units makes the sandbox provider unavailable (503). */
export const SANDBOX_PRICE_LOCK_UNAVAILABLE_AMOUNT = 503n;

/**
 * The sandbox settlement provider: locks the rates port's rate (the sandbox table) for 10 minutes under a code
 * `plk_<hex>`. Magic values (docs/subscriptions.md): fiat amount 503 -> settlement_provider_unavailable; a currency
 * the rates cannot price -> price_currency_not_quotable; `XTS` -> rate_source_unavailable (the rates sandbox).
 */
export class SandboxSettlementProvider implements SettlementProvider {
  constructor(
    private readonly rates: RateSource,
    private readonly clock: Clock,
  ) {}

  async lockPrice(request: PriceLockRequest): Promise<PriceLock> {
    if (request.fiatAmount === SANDBOX_PRICE_LOCK_UNAVAILABLE_AMOUNT)
      throw settlementProviderUnavailable('sandbox: fiat amount 503 simulates an outage');
    const rate = rateFor(await this.rates.quote(request.currency), request.currency, request.tokenSymbol);
    return {
      priceLockCode: `plk_${randomBytes(12).toString('hex')}`,
      tokenAmount: convertAtRate(request.fiatAmount, request.currency, rate, request.tokenDecimals),
      rate: rate.value,
      expiresAt: new Date(this.clock.now().getTime() + SANDBOX_PRICE_LOCK_TTL_SECONDS * 1000),
    };
  }

  /** The sandbox holds nothing for a lock (its code and rate are all there is): nothing to give back. */
  releasePriceLock(): Promise<void> {
    return Promise.resolve();
  }
}
