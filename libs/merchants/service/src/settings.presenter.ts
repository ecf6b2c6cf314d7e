import type { MerchantsConfig } from './merchants.config';
import type { MerchantSettingsRow } from './settings.reader';

/** The settings record as the API shows it (snake_case, every field always present, null when unset). */
export function presentSettings(row: MerchantSettingsRow, config: MerchantsConfig) {
  return {
    object: 'settings' as const,
    merchant_id: row.merchant_id,
    mode: row.mode,
    display_name: row.display_name,
    settlement_mode: row.settlement_mode,
    settlement_address: row.settlement_address,
    merchant_signer: row.merchant_signer,
    // One EVM signer serves every EVM chain; status per supported chain so non-EVM chains can differ later.
    signers: config.supportedChains.map((chain) => ({
      chain,
      address: row.merchant_signer,
      status: row.merchant_signer ? ('registered' as const) : ('missing' as const),
    })),
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
