import type { ChainRegistrationResource, SettingsResource } from '@stablepay/merchants-api';
import type { RegistrationRow } from './chain-registration/registration.store';
import type { MerchantsConfig } from './merchants.config';
import type { MerchantSettingsRow } from './settings.reader';

/**
 * The merchant's status in one chain's registry, as settings' `chain_registrations` show it: the registration
 * worker's row when it has one; else `pending` once both values are given (the worker has not taken the
 * merchant's event yet), `not_started` before. Also what a checkout is refused on (payments scope).
 */
export function chainRegistrationStatus(
  row: Pick<MerchantSettingsRow, 'merchant_signer' | 'settlement_address'>,
  registrations: readonly RegistrationRow[],
  chain: string,
): ChainRegistrationResource['status'] {
  const found = registrations.find((r) => r.chain === chain);
  if (found) return found.status;
  return row.merchant_signer !== null && row.settlement_address !== null ? 'pending' : 'not_started';
}

/**
 * The merchant in each chain's registry: the chains the deployment acts on (supported and with an RPC URL), for a
 * merchant of the chains' mode; the worker's row when it has one, else what the merchant still has to give. Each
 * entry names what a merchant signature over the registry binds (MerchantChange, RevokeAuthorizations): the
 * registry address (`verifyingContract`) and the merchant's current epoch there (`epochs`, read from the chain).
 */
export function presentChainRegistrations(
  row: MerchantSettingsRow,
  config: MerchantsConfig,
  registrations: readonly RegistrationRow[],
  epochs: ReadonlyMap<string, string | null> = new Map(),
): ChainRegistrationResource[] {
  if (row.mode !== config.chainMode) return [];
  const chains = chainsActedOn(config);
  return chains.map((chain): ChainRegistrationResource => {
    const found = registrations.find((r) => r.chain === chain);
    const complete = row.merchant_signer !== null && row.settlement_address !== null;
    const held = found ? chainHolds(found) : null;
    return {
      chain,
      status: chainRegistrationStatus(row, registrations, chain),
      signer: found ? found.signer : complete ? row.merchant_signer : null,
      settlement_address: found ? found.settlement : complete ? row.settlement_address : null,
      tx_hash: found ? found.tx_hash : null,
      updated_at: found ? new Date(found.updated_at).toISOString() : null,
      on_chain: held && { signer: held.signer, settlement_address: held.settlement, tx_hash: held.txHash },
      registry_address: config.registryAddress,
      epoch: epochs.get(chain) ?? null,
    };
  });
}

type Holdings = Pick<
  RegistrationRow,
  'status' | 'signer' | 'settlement' | 'tx_hash' | 'chain_signer' | 'chain_settlement' | 'chain_tx_hash'
>;

/**
 * What the chain's registry holds as the worker last read or wrote it, null when unknown. A `registered` row holds
 * what it asks for (also a row written before the holdings were kept apart).
 */
function chainHolds(
  found: Partial<Holdings> & Pick<Holdings, 'status' | 'signer'>,
): { signer: string; settlement: string | null; txHash: string | null } | null {
  if (found.chain_signer) {
    return {
      signer: found.chain_signer,
      settlement: found.chain_settlement ?? null,
      txHash: found.chain_tx_hash ?? null,
    };
  }
  if (found.status === 'registered') {
    return { signer: found.signer, settlement: found.settlement ?? null, txHash: found.tx_hash ?? null };
  }
  return null;
}

/**
 * The chains whose registry may hold the merchant (those with a registration row, for a merchant of the chains'
 * mode): only there is an epoch worth reading.
 */
export function chainsWithRegistration(
  row: Pick<MerchantSettingsRow, 'mode'>,
  config: ChainsConfig,
  registrations: readonly Pick<RegistrationRow, 'chain'>[],
): string[] {
  if (row.mode !== config.chainMode) return [];
  const actedOn = chainsActedOn(config);
  return registrations.map((r) => r.chain).filter((chain) => actedOn.includes(chain));
}

/** What a chain's signer status is read from: the chains supported and acted on, and their mode. */
type ChainsConfig = Pick<MerchantsConfig, 'supportedChains' | 'chainRpcUrls' | 'chainMode'>;

/** The chains the deployment acts on: supported and with an RPC URL (none: a deployment without chains). */
function chainsActedOn(config: ChainsConfig): readonly string[] {
  return config.supportedChains.filter((c) => config.chainRpcUrls[c] !== undefined);
}

/**
 * The signer per supported chain (one EVM signer serves every EVM chain; per chain so non-EVM chains can differ
 * later), with where it stands:
 * - `registered`: on a chain the deployment acts on, that chain's registry holds this signer (the registration
 *   worker's row, written from the registry it read or the registration it sent); on a chain it does not act on
 *   (no RPC URL, e.g. a deployment without chains) nothing can be read, and a given signer is registered with the
 *   service only;
 * - `pending`: given, but not (yet) the signer that chain's registry holds: the operator has not registered it
 *   there yet, or a changed signer awaits its MerchantChange (`chain_registrations` says which);
 * - `missing`: none given;
 * - `chain_mode_mismatch`: the deployment runs chains of the other mode than the merchant's: the signer is kept
 *   (configured before go-live) but registered on no chain here, and every money flow answers 409.
 */
export function presentSigners(
  row: Pick<MerchantSettingsRow, 'mode' | 'merchant_signer'>,
  config: ChainsConfig,
  registrations: readonly (Pick<RegistrationRow, 'chain' | 'status' | 'signer'> & Partial<Holdings>)[],
): Array<{ chain: string; address: string | null; status: SignerStatus }> {
  const actedOn = chainsActedOn(config);
  const status = (chain: string): SignerStatus => {
    if (row.mode !== config.chainMode && actedOn.length > 0) return 'chain_mode_mismatch';
    const signer = row.merchant_signer;
    if (!signer) return 'missing';
    if (!actedOn.includes(chain)) return 'registered';
    const found = registrations.find((r) => r.chain === chain);
    // What the chain holds, not what the row asks for: a settlement-only change asks for new values while the
    // registry still holds this signer (it was shown `pending`).
    const held = found ? chainHolds(found) : null;
    return held?.signer.toLowerCase() === signer.toLowerCase() ? 'registered' : 'pending';
  };
  return config.supportedChains.map((chain) => ({
    chain,
    address: row.merchant_signer,
    status: status(chain),
  }));
}

type SignerStatus = SettingsResource['signers'][number]['status'];

/** The settings record as the API shows it (snake_case, every field always present, null when unset). */
export function presentSettings(
  row: MerchantSettingsRow,
  config: MerchantsConfig,
  registrations: readonly RegistrationRow[] = [],
  epochs: ReadonlyMap<string, string | null> = new Map(),
) {
  return {
    object: 'settings' as const,
    merchant_id: row.merchant_id,
    mode: row.mode,
    display_name: row.display_name,
    settlement_mode: row.settlement_mode,
    settlement_address: row.settlement_address,
    merchant_signer: row.merchant_signer,
    signers: presentSigners(row, config, registrations),
    chain_registrations: presentChainRegistrations(row, config, registrations, epochs),
    payment_factory_address: config.paymentFactoryAddress,
    // Until the chain layer reports a deployed factory, this says so instead of showing a made-up address.
    payment_factory_status: config.paymentFactoryAddress
      ? ('deployed' as const)
      : ('pending_chain_layer' as const),
    background_color: row.background_color,
    primary_color: row.primary_color,
    webhook_url: row.webhook_url,
    webhook_secret_fingerprint: row.webhook_secret_fingerprint,
    previous_secret_expires_at: row.previous_secret_expires_at
      ? new Date(row.previous_secret_expires_at).toISOString()
      : null,
    webhook_event_types: row.webhook_event_types,
    merchant_pauser: row.merchant_pauser,
    subscription_manager_address: row.subscription_manager_address,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}
