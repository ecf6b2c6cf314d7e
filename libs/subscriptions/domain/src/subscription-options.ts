import { divCeil, toAmount } from '@stablepay/util';
import { currencyExponent, parseRateValue, type Rate, toTokenUnits } from './rates';
import type { SubscriptionCheckoutObject } from './subscription-checkout.events';

/** A supported chain as the subscriptions domain needs it (a structural subset of @stablepay/evm's ChainInfo). */
export interface OfferedChain {
  readonly caip2: string;
  readonly name: string;
  readonly stablecoins: ReadonlyArray<{
    readonly symbol: string;
    readonly decimals: number;
    readonly address: string;
    readonly assetId: string;
  }>;
}

/**
 * One entry of `subscription_options`: a stablecoin on a supported chain the subscriber can pay with, and the
 * plan's price, cap and budget converted to its smallest units at one rate, rounded up (SPEC Rules 3 and 4).
 */
export interface SubscriptionOption {
  readonly chain: string;
  readonly chain_name: string;
  /** CAIP-19 of the token. */
  readonly asset: string;
  readonly token_symbol: string;
  readonly token_decimals: number;
  readonly token_address: string;
  /** Token smallest units. */
  readonly price_amount: string;
  readonly cap_amount: string;
  readonly budget_amount: string;
  /** price_currency major units per one whole token (decimal string). */
  readonly rate: string;
  readonly rate_currency: string;
  readonly rate_as_of: string;
  readonly rate_source: string;
}

/**
 * Every stablecoin on every chain of the intent's `supported_chains` (in that order) that the rate source quotes
 * the price currency against. Chains the service no longer supports and tokens without a rate are left out, so
 * the list may be empty; it is always an array.
 */
export function subscriptionOptions(
  checkout: Pick<
    SubscriptionCheckoutObject,
    'price' | 'cap' | 'budget' | 'price_currency' | 'supported_chains'
  >,
  chains: readonly OfferedChain[],
  rates: readonly Rate[],
): SubscriptionOption[] {
  const currency = checkout.price_currency;
  if (currency === null) return [];
  const bySymbol = new Map(
    rates.filter((r) => r.currency === currency).map((r) => [r.tokenSymbol.toUpperCase(), r]),
  );
  const exponent = currencyExponent(currency);
  const price = toAmount(checkout.price);
  const cap = toAmount(checkout.cap);
  const budget = toAmount(checkout.budget);
  const options: SubscriptionOption[] = [];
  for (const caip2 of checkout.supported_chains) {
    const chain = chains.find((c) => c.caip2 === caip2);
    if (!chain) continue;
    for (const token of chain.stablecoins) {
      const rate = bySymbol.get(token.symbol.toUpperCase());
      if (!rate) continue;
      // One rate for the three figures: the subscriber signs a consistent set.
      const rational = parseRateValue(rate.value);
      const priceUnits = toTokenUnits(price, rational, token.decimals, exponent);
      options.push({
        chain: chain.caip2,
        chain_name: chain.name,
        asset: token.assetId,
        token_symbol: token.symbol,
        token_decimals: token.decimals,
        token_address: token.address,
        price_amount: priceUnits.toString(),
        cap_amount: inPriceUnits(cap, price, priceUnits).toString(),
        budget_amount: inPriceUnits(budget, price, priceUnits).toString(),
        rate: rate.value,
        rate_currency: currency,
        rate_as_of: rate.asOf,
        rate_source: rate.source,
      });
    }
  }
  return options;
}

/**
 * Cap or budget in token units at the rate the rounded-up price carries (`priceUnits / price`), rounded up. Each
 * figure rounded up on its own broke the plan's multiples: ARS 100.00 at 1,185.50 per USDC is 84,353 units
 * (84,352.6...), a budget of ARS 300.00 253,058 (253,057.9...), less than three charges of the price, so the third
 * charge the plan allows per window was refused `budget_exceeded` (and the default budget, 10 times the price, took
 * 9). At the price's rate a budget of k times the price is exactly k charges, and never less than the figure at the
 * quoted rate rounded up (the price's rate is at or above it): the subscriber signs at most k - 1 units more.
 */
function inPriceUnits(minor: bigint, price: bigint, priceUnits: bigint): bigint {
  return divCeil(minor * priceUnits, price);
}
