import type { Mode } from '@stablepay/event-store';
import type { AuthenticatedMerchant } from '@stablepay/http';
import type { FiatSettlementDetails, SettlementMode } from '@stablepay/merchants-domain';
import type { RevocationInput, RevokeAuthorizationsResult } from './merchant.commands';

/** GET/POST/PUT/PATCH /settings: the settings record (snake_case, every field present, null when unset). */
export interface SettingsResource {
  readonly object: 'settings';
  readonly merchant_id: string;
  readonly mode: Mode;
  readonly display_name: string;
  readonly settlement_mode: SettlementMode;
  readonly settlement_address: string | null;
  readonly merchant_signer: string | null;
  readonly signers: ReadonlyArray<{
    readonly chain: string;
    readonly address: string | null;
    /**
     * `registered`: the chain's registry holds this signer (a chain the deployment does not act on: given);
     * `pending`: given, not (yet) the registry's signer there; `chain_mode_mismatch`: the deployment's chains are of
     * the other mode than the merchant's.
     */
    readonly status: 'registered' | 'pending' | 'missing' | 'chain_mode_mismatch';
  }>;
  /**
   * Where the merchant stands in the registry of each chain the deployment acts on (empty without chains, or for a
   * merchant of the other mode than the chains'): `not_started` (no signer or settlement address yet), `pending`
   * (the operator registers it), `registered` (the chain holds exactly `signer` and `settlement_address`, the
   * settings' values), `change_requires_merchant_signature` (the chain holds other values: sign a MerchantChange,
   * POST /settings/merchant-change).
   */
  readonly chain_registrations: ReadonlyArray<ChainRegistrationResource>;
  readonly payment_factory_address: string | null;
  readonly payment_factory_status: 'deployed' | 'pending_chain_layer';
  readonly background_color: string | null;
  readonly primary_color: string | null;
  readonly webhook_url: string | null;
  readonly webhook_secret_fingerprint: string | null;
  readonly previous_secret_expires_at: string | null;
  readonly webhook_event_types: string[] | null;
  readonly merchant_pauser: string | null;
  readonly subscription_manager_address: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

export interface ChainRegistrationResource {
  readonly chain: string;
  readonly status: 'not_started' | 'pending' | 'registered' | 'change_requires_merchant_signature';
  /** The values being registered (the settings'); null before both exist. */
  readonly signer: string | null;
  readonly settlement_address: string | null;
  /** The registration's or the relayed MerchantChange's transaction, once there is one. */
  readonly tx_hash: string | null;
  readonly updated_at: string | null;
  /**
   * What the chain's registry holds, as last read or written by the service (null: not known yet): differs from
   * `signer`/`settlement_address` while a change awaits its MerchantChange. `tx_hash`: the transaction the service
   * sent or relayed to put it there (null when it found it there).
   */
  readonly on_chain: {
    readonly signer: string;
    readonly settlement_address: string | null;
    readonly tx_hash: string | null;
  } | null;
  /** The chain's StablepayRegistry: the `verifyingContract` of MerchantChange and RevokeAuthorizations. */
  readonly registry_address: string | null;
  /** The merchant's current epoch in that registry (every merchant signature names it); null when unknown. */
  readonly epoch: string | null;
}

export interface MerchantChangeInput {
  readonly chain: string;
  readonly deadline: string;
  readonly signature: string;
  readonly merchantSigner?: string;
  readonly settlementAddress?: string;
}

/** PATCH /settings answers the settings, with the webhook secret when this update issued it (shown once). */
export type UpdatedSettingsResource = SettingsResource & { readonly webhook_secret?: string };

export interface WebhookSecretResource {
  readonly object: 'webhook_secret';
  readonly webhook_secret: string;
  readonly previous_secret_expires_at: string;
}

export interface PauserDeclarationResource {
  readonly object: 'pauser_declaration';
  readonly declaration_message: string;
  readonly merchant_pauser: string | null;
  readonly shared_pauser_risk_acknowledged: boolean;
  readonly locked: boolean;
}

/** GET/PUT /payments/settlement (SPEC Endpoints > Payments). */
export interface SettlementConfigurationResource {
  readonly object: 'settlement_configuration';
  readonly settlement_mode: SettlementMode;
  readonly settlement_address: string | null;
  readonly fiat: {
    readonly currency: string | null;
    readonly beneficiary_name: string | null;
    readonly bank_name: string | null;
    readonly account_number_last4: string | null;
    readonly bank_code: string | null;
    readonly country: string | null;
    readonly complete: boolean;
    readonly missing_fields: string[];
    readonly configured_at: string | null;
  } | null;
  readonly fiat_settlement_required_fields: string[];
  readonly updated_at: string;
}

/** POST /admin/merchants: the merchant, with its secret API key (returned here once and never again). */
export interface CreatedMerchantResource {
  readonly object: 'merchant';
  readonly id: string;
  readonly name: string;
  readonly mode: Mode;
  readonly settlement_mode: SettlementMode;
  readonly api_key: string;
  readonly created_at: string;
}

/** POST /admin/merchants/:merchantId/beta-features: every beta feature and whether it is on for the merchant. */
export interface BetaFeaturesResource {
  readonly object: 'merchant_beta_features';
  readonly merchant: string;
  readonly payouts: boolean;
}

export interface ProfilePatch {
  readonly displayName?: string;
  readonly webhookUrl?: string | null;
  readonly backgroundColor?: string | null;
  readonly primaryColor?: string | null;
  readonly webhookEventTypes?: string[] | null;
}

export interface PauserDeclarationInput {
  readonly merchantPauser: string;
  readonly signature: string;
  readonly acknowledgeSharedPauserRisk: boolean;
}

export interface SettlementInput {
  readonly settlementAddress?: string;
  readonly fiat?: Partial<FiatSettlementDetails> | null;
}

/**
 * The inbound port of the merchants scope that the gateway's controllers call (settings, settlement, operator
 * API). Implemented by MerchantsGateway in @stablepay/merchants-service.
 */
export interface MerchantsUseCases {
  settings(merchant: AuthenticatedMerchant): Promise<SettingsResource>;
  registerSigner(
    merchant: AuthenticatedMerchant,
    merchantSigner: string,
    settlementAddress?: string,
  ): Promise<SettingsResource>;
  updateSettlementAddress(
    merchant: AuthenticatedMerchant,
    settlementAddress: string,
  ): Promise<SettingsResource>;
  updateProfile(merchant: AuthenticatedMerchant, patch: ProfilePatch): Promise<UpdatedSettingsResource>;
  /** POST /settings/merchant-change: relays a merchant-signed MerchantChange (through the owner of the key). */
  changeMerchantOnChain(
    merchant: AuthenticatedMerchant,
    input: MerchantChangeInput,
  ): Promise<SettingsResource>;
  /** POST /settings/revoke-authorizations: relays merchant-signed revocations (through the owner of the key). */
  revokeAuthorizations(
    merchant: AuthenticatedMerchant,
    revocations: readonly RevocationInput[],
  ): Promise<RevokeAuthorizationsResult>;
  /**
   * POST /settings/webhook/secret. With the Idempotency-Key's command id, a retry whose first attempt rotated but
   * lost its answer (the process died, a 5xx after the append) answers that rotation's secret instead of rotating
   * again.
   */
  rotateWebhookSecret(merchant: AuthenticatedMerchant, commandId?: string): Promise<WebhookSecretResource>;
  pauser(merchant: AuthenticatedMerchant): Promise<PauserDeclarationResource>;
  declarePauser(
    merchant: AuthenticatedMerchant,
    input: PauserDeclarationInput,
  ): Promise<PauserDeclarationResource>;
  settlement(merchant: AuthenticatedMerchant): Promise<SettlementConfigurationResource>;
  configureSettlement(
    merchant: AuthenticatedMerchant,
    input: SettlementInput,
  ): Promise<SettlementConfigurationResource>;
  /** Operator: enables or disables beta features of a merchant (404 for an unknown merchant). */
  setBetaFeatures(merchantId: string, features: Record<string, unknown>): Promise<BetaFeaturesResource>;
  /**
   * POST /admin/merchants. With the Idempotency-Key's command id, a retry whose first attempt created the merchant
   * but lost its answer answers that merchant with a reissued API key (the first one reached nobody).
   * `attemptStartedAt` (ISO): when the key was claimed for this attempt.
   */
  createMerchant(input: {
    name: string;
    mode: Mode;
    settlementMode: SettlementMode;
    commandId?: string;
    attemptStartedAt?: string;
  }): Promise<CreatedMerchantResource>;
}

export const MERCHANTS_USE_CASES = Symbol('MERCHANTS_USE_CASES');

/** The operator token (ADMIN_TOKEN) the admin routes require, or null when the operator API is off (404). */
export const MERCHANTS_ADMIN_TOKEN = Symbol('MERCHANTS_ADMIN_TOKEN');
