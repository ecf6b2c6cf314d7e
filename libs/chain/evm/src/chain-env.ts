import { ConfigError, envOptional } from '@stablepay/util';
import { parseCaip2 } from './caip';

type Env = Record<string, string | undefined>;

/**
 * `caip2=value` pairs separated by commas (`CHAIN_RPC_URLS`, `CHAIN_CONFIRMATIONS`, `INDEXER_START_BLOCKS`...),
 * keyed by canonical CAIP-2 id. Every error is a ConfigError naming the variable; a chain listed twice is refused.
 */
export function parseChainMap<T>(
  env: Env,
  name: string,
  parseValue: (value: string, chain: string) => T,
): Map<string, T> {
  const raw = envOptional(env, name);
  const out = new Map<string, T>();
  if (raw === undefined) return out;
  for (const entry of raw
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const eq = entry.indexOf('=');
    if (eq < 0)
      throw new ConfigError(`environment variable ${name}: expected <caip2>=<value>, got '${entry}'`);
    const chain = configChain(name, entry.slice(0, eq).trim());
    const value = entry.slice(eq + 1).trim();
    if (value === '') throw new ConfigError(`environment variable ${name}: ${chain} has no value`);
    if (out.has(chain)) throw new ConfigError(`environment variable ${name} lists ${chain} twice`);
    out.set(chain, parseValue(value, chain));
  }
  return out;
}

/** A CAIP-2 id read from a variable, canonicalised; a malformed one is a ConfigError naming the variable. */
export function configChain(name: string, raw: string): string {
  try {
    return parseCaip2(raw).caip2;
  } catch (error) {
    throw new ConfigError(
      `environment variable ${name}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/**
 * The one reading of `CHAIN_RPC_URLS` (`eip155:8453=https://...,eip155:137=https://...`) every service shares
 * (indexer, chain layer, merchants, subscriptions): canonical CAIP-2 keys, http(s) URLs, no chain twice. Empty
 * when unset. Errors never repeat a URL: RPC URLs often carry provider keys.
 */
export function chainRpcUrlsFromEnv(env: Env): ReadonlyMap<string, string> {
  return parseChainMap(env, 'CHAIN_RPC_URLS', (value, chain) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new ConfigError(`environment variable CHAIN_RPC_URLS: ${chain} has an invalid URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new ConfigError(`environment variable CHAIN_RPC_URLS: ${chain} must use an http(s) URL`);
    return value;
  });
}
