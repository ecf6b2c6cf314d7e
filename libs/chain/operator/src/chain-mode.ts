import { conflict, envEnum } from '@stablepay/util';
import type { SupportedChains } from './chain-operator.config';

export type ChainMode = 'live' | 'test';

/** CHAIN_MODE when unset: a deployment given real RPC endpoints and no mode treats them as the mainnets they are. */
export const DEFAULT_CHAIN_MODE: ChainMode = 'live';

/**
 * The one reading of CHAIN_MODE (`live` or `test`, default live), for every scope: the chain layer, the merchants
 * scope (settings, registrations, pauser checks) and, through the chain layer, payments and subscriptions. Scopes
 * that defaulted differently disagreed about the same chains' mode when the variable was unset. The embedded run
 * sets `test` itself when it starts its local chains.
 */
export function chainModeFromEnv(env: Record<string, string | undefined>): ChainMode {
  return envEnum(env, 'CHAIN_MODE', ['live', 'test'] as const, DEFAULT_CHAIN_MODE);
}

/**
 * The mode of the chains this deployment acts on (CHAIN_MODE), or null when it acts on none (no CHAIN_RPC_URLS):
 * then nothing is deployed, signed or watched for anyone, so no merchant's mode is out of place.
 */
export function servedChainMode(chains: Pick<SupportedChains, 'enabled' | 'mode'>): ChainMode | null {
  return chains.enabled ? chains.mode : null;
}

/** Whether the deployment acts for a merchant of this mode (always, when it acts on no chain). */
export function chainModeServed(served: ChainMode | null, merchantMode: ChainMode): boolean {
  return served === null || served === merchantMode;
}

/**
 * Refuses (409 `chain_mode_mismatch`) a merchant whose mode is not the deployment's chains' mode. The local and
 * test chains reuse the mainnet chain ids, so without this a live merchant on a test deployment would be offered
 * mainnet token addresses on the test RPCs (and a test merchant on a live deployment test tokens on mainnet): a
 * customer's wallet on the real chain would act on what the service signed for the other one.
 */
export function assertChainModeServed(served: ChainMode | null, merchantMode: ChainMode): void {
  if (chainModeServed(served, merchantMode)) return;
  throw conflict(
    'chain_mode_mismatch',
    `This deployment's chains are ${served} chains; a ${merchantMode} merchant takes no payments or subscriptions on them (use a ${served} API key here, or a ${merchantMode} deployment).`,
  );
}
