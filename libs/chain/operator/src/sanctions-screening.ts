import { Logger } from '@nestjs/common';
import { getAddress, isAddress } from 'ethers';
import { SandboxSanctionsScreening, type SanctionsScreening, type ScreeningResult } from '@stablepay/evm';
import { ConfigError, envEnum, envInt, envOptional } from '@stablepay/util';

type Env = Record<string, string | undefined>;

/** Which sanctions screening provider the chain-facing services use (payments' deposits, subscriptions' wallets). */
export type SanctionsScreeningConfig =
  | { readonly provider: 'sandbox' }
  | {
      readonly provider: 'chainalysis';
      /** The API's origin (CHAINALYSIS_API_URL, default the public sanctions API). */
      readonly apiUrl: string;
      readonly apiKey: string;
      /** Per address checked (SANCTIONS_SCREENING_TIMEOUT_MS, default 5000). */
      readonly timeoutMs: number;
    };

export const CHAINALYSIS_PUBLIC_API_URL = 'https://public.chainalysis.com';

/**
 * The one reading of the screening configuration, for every service that screens chain addresses:
 * - `SANCTIONS_SCREENING_PROVIDER`: `sandbox` (default; the magic addresses of docs/payment-deposits.md) or
 *   `chainalysis` (the Chainalysis sanctions API);
 * - with `chainalysis`: `CHAINALYSIS_API_KEY` (secret, required), `CHAINALYSIS_API_URL` (default
 *   https://public.chainalysis.com), `SANCTIONS_SCREENING_TIMEOUT_MS` (default 5000).
 * Every error is a ConfigError naming the variable; an API key never appears in one.
 */
export function sanctionsScreeningConfigFromEnv(env: Env): SanctionsScreeningConfig {
  const provider = envEnum(
    env,
    'SANCTIONS_SCREENING_PROVIDER',
    ['sandbox', 'chainalysis'] as const,
    'sandbox',
  );
  if (provider === 'sandbox') return { provider };
  const apiKey = envOptional(env, 'CHAINALYSIS_API_KEY');
  if (apiKey === undefined)
    throw new ConfigError(
      'environment variable CHAINALYSIS_API_KEY is required with SANCTIONS_SCREENING_PROVIDER=chainalysis',
    );
  const apiUrl = envOptional(env, 'CHAINALYSIS_API_URL') ?? CHAINALYSIS_PUBLIC_API_URL;
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    throw new ConfigError('environment variable CHAINALYSIS_API_URL must be an http(s) URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ConfigError('environment variable CHAINALYSIS_API_URL must be an http(s) URL');
  return {
    provider,
    apiUrl,
    apiKey,
    timeoutMs: envInt(env, 'SANCTIONS_SCREENING_TIMEOUT_MS', 5000, 1, 60_000),
  };
}

/** The adapter the configuration names (each call a new instance: the sandbox keeps per-process attempt counts). */
export function sanctionsScreening(config: SanctionsScreeningConfig): SanctionsScreening {
  return config.provider === 'chainalysis'
    ? new ChainalysisSanctionsScreening(config)
    : new SandboxSanctionsScreening();
}

export const sanctionsScreeningFromEnv = (env: Env): SanctionsScreening =>
  sanctionsScreening(sanctionsScreeningConfigFromEnv(env));

/**
 * The Chainalysis sanctions API (`GET {apiUrl}/api/v1/address/{address}` with `X-API-Key`; the answer
 * `{ "identifications": [...] }` lists the sanctions designations of the address, empty when there are none). Any
 * identification is a match. A provider that cannot answer (network error, timeout, a non-2xx status such as a
 * rejected key or a rate limit, a body without `identifications`) is `unreachable`: the caller screens again later,
 * never skips screening. A match wins over another address being unreachable.
 */
export class ChainalysisSanctionsScreening implements SanctionsScreening {
  private readonly logger = new Logger('sanctions-screening.chainalysis');

  constructor(
    private readonly options: {
      readonly apiUrl: string;
      readonly apiKey: string;
      readonly timeoutMs: number;
    },
  ) {}

  async screen(addresses: readonly string[]): Promise<ScreeningResult> {
    let unreachable = false;
    for (const address of addresses) {
      const result = await this.check(address);
      if (result.kind === 'match') return result;
      if (result.kind === 'unreachable') unreachable = true;
    }
    return unreachable ? { kind: 'unreachable' } : { kind: 'clear' };
  }

  private async check(address: string): Promise<ScreeningResult> {
    const url = new URL(
      `api/v1/address/${encodeURIComponent(address)}`,
      this.options.apiUrl.endsWith('/') ? this.options.apiUrl : `${this.options.apiUrl}/`,
    );
    try {
      const res = await fetch(url, {
        headers: { 'X-API-Key': this.options.apiKey, accept: 'application/json' },
        signal: AbortSignal.timeout(this.options.timeoutMs),
        redirect: 'error',
      });
      if (!res.ok) {
        await res.body?.cancel();
        return this.unreachable(`answered ${res.status}`);
      }
      const identifications = ((await res.json()) as { identifications?: unknown } | null)?.identifications;
      if (!Array.isArray(identifications)) return this.unreachable('answered without identifications');
      if (identifications.length === 0) return { kind: 'clear' };
      return { kind: 'match', address: isAddress(address) ? getAddress(address) : address };
    } catch (error) {
      // A timeout (TimeoutError) or a network failure (fetch's TypeError with the system code as its cause).
      const e = error as { name?: unknown; cause?: { code?: unknown } } | null;
      const code = e?.cause?.code;
      return this.unreachable(
        [e?.name, code].filter((part): part is string => typeof part === 'string').join(' ') || 'failed',
      );
    }
  }

  private unreachable(reason: string): ScreeningResult {
    // Operators must see why screening holds (a rejected key holds every payment): the reason, never the key.
    this.logger.warn({ msg: 'sanctions screening provider unreachable; will screen again', reason });
    return { kind: 'unreachable' };
  }
}
