import {
  ISO_TEST_CURRENCY,
  isRateValue,
  type Rate,
  type RateSource,
  rateSourceUnavailable,
} from '@stablepay/subscriptions-domain';
import { type Clock, ConfigError, isTwoDecimalIsoCurrency } from '@stablepay/util';

/** currency -> token symbol -> rate (currency major units per one whole token, decimal string). */
export type RateTable = Readonly<Record<string, Readonly<Record<string, string>>>>;

/**
 * The service's own pricing source as SPEC.md describes it: it quotes ARS only. The sandbox adds whatever
 * SANDBOX_RATES lists (see parseRateTable), so tests and demos can price in other currencies.
 */
export const DEFAULT_SANDBOX_RATES: RateTable = {
  ARS: { USDC: '1185.50', USDT: '1186.25', DAI: '1185.50' },
};

/** ISO-4217 code reserved for testing: the sandbox answers it as an unavailable source (503 rate_source_unavailable). */
export const SANDBOX_UNAVAILABLE_CURRENCY = ISO_TEST_CURRENCY;

/**
 * SANDBOX_RATES: comma-separated `CURRENCY/TOKEN=rate` entries, for example
 * `USD/USDC=1,USD/USDT=1.0002,EUR/USDC=0.92`. Entries add to (or override) the built-in ARS rates;
 * `ARS/USDT=` with an empty rate removes one.
 */
export function parseRateTable(raw: string | undefined, base: RateTable = DEFAULT_SANDBOX_RATES): RateTable {
  const table: Record<string, Record<string, string>> = Object.fromEntries(
    Object.entries(base).map(([c, t]) => [c, { ...t }]),
  );
  if (raw === undefined || raw.trim() === '') return table;
  for (const entry of raw
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const m = /^([A-Za-z]{3})\/([A-Za-z0-9.]{1,16})=(.*)$/.exec(entry);
    if (!m)
      throw new ConfigError(
        `environment variable SANDBOX_RATES: '${entry}' is not CURRENCY/TOKEN=rate (for example USD/USDC=1)`,
      );
    const currency = (m[1] ?? '').toUpperCase();
    const token = (m[2] ?? '').toUpperCase();
    const value = m[3] ?? '';
    // Prices and quotes take only two-decimal ISO-4217 currencies in use: a rate for another code is never asked for.
    if (!isTwoDecimalIsoCurrency(currency))
      throw new ConfigError(
        `environment variable SANDBOX_RATES: '${currency}' of '${entry}' is not an ISO-4217 currency in use with two decimals`,
      );
    if (value === '') {
      delete table[currency]?.[token];
      continue;
    }
    if (!isRateValue(value))
      throw new ConfigError(
        `environment variable SANDBOX_RATES: rate '${value}' of ${currency}/${token} must be a positive decimal`,
      );
    table[currency] = { ...(table[currency] ?? {}), [token]: value };
  }
  return table;
}

/** The sandbox adapter of the rates port: a fixed table, timestamped with the injected clock when quoted. */
export class SandboxRateSource implements RateSource {
  constructor(
    private readonly table: RateTable,
    private readonly clock: Clock,
  ) {}

  async quote(currency: string): Promise<readonly Rate[]> {
    const code = currency.toUpperCase();
    if (code === SANDBOX_UNAVAILABLE_CURRENCY)
      throw rateSourceUnavailable(`sandbox: ${SANDBOX_UNAVAILABLE_CURRENCY} simulates an outage`);
    const asOf = this.clock.now().toISOString();
    return Object.entries(this.table[code] ?? {}).map(([tokenSymbol, value]) => ({
      currency: code,
      tokenSymbol,
      value,
      asOf,
      source: 'sandbox',
    }));
  }
}
