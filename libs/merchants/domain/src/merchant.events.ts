/**
 * Events of the `merchant-<id>` stream. Types are past tense with an explicit version; a changed shape becomes
 * a new version plus an upcaster. No secret ever appears here: API keys as SHA-256 hashes, webhook secrets as
 * an id and a fingerprint (the ciphertext lives in the webhook_secrets table).
 */
export type Mode = 'test' | 'live';
export type SettlementMode = 'crypto' | 'fiat';

export type MerchantCreated = {
  type: 'MerchantCreated.v1';
  data: {
    merchantId: string;
    name: string;
    mode: Mode;
    settlementMode: SettlementMode;
    apiKeyHash: string;
    apiKeyHint: string;
    createdAt: string;
  };
};

/**
 * A keyed `POST /admin/merchants` retried after its first attempt created the merchant but lost the answer: the first
 * API key reached nobody (only its hash is stored), so the retry issues another and this replaces the first.
 */
export type MerchantApiKeyReissued = {
  type: 'MerchantApiKeyReissued.v1';
  data: { apiKeyHash: string; apiKeyHint: string; replacedApiKeyHash: string; reissuedAt: string };
};

export type MerchantSignerRegistered = {
  type: 'MerchantSignerRegistered.v1';
  data: { merchantSigner: string; registeredAt: string };
};

export type SettlementAddressChanged = {
  type: 'SettlementAddressChanged.v1';
  data: { settlementAddress: string; changedAt: string };
};

/** Only the fields that changed are present; a `null` color means "reset to the platform default". */
export type MerchantProfileUpdated = {
  type: 'MerchantProfileUpdated.v1';
  data: {
    displayName?: string;
    webhookUrl?: string | null;
    backgroundColor?: string | null;
    primaryColor?: string | null;
    webhookEventTypes?: string[] | null;
    updatedAt: string;
  };
};

export type WebhookSecretIssued = {
  type: 'WebhookSecretIssued.v1';
  data: { secretId: string; fingerprint: string; issuedAt: string };
};

export type WebhookSecretRotated = {
  type: 'WebhookSecretRotated.v1';
  data: {
    secretId: string;
    fingerprint: string;
    previousSecretId: string;
    previousSecretExpiresAt: string;
    rotatedAt: string;
  };
};

export type PauserDeclared = {
  type: 'PauserDeclared.v1';
  data: { merchantPauser: string; sharedPauserRiskAcknowledged: boolean; declaredAt: string };
};

/** Recorded when the chain layer deploys the merchant's subscription manager: the pauser is locked from then on. */
export type SubscriptionManagerDeployed = {
  type: 'SubscriptionManagerDeployed.v1';
  data: { chain: string; address: string; deployedAt: string };
};

/**
 * The registry of `chain` now holds this signer and settlement address for the merchant, changed by a
 * merchant-signed MerchantChange (consented by the signer the chain held) that the operator relayed in `txHash`.
 */
export type MerchantChangedOnChain = {
  type: 'MerchantChangedOnChain.v1';
  data: { chain: string; signer: string; settlement: string; txHash: string; changedAt: string };
};

/**
 * Payout bank details of a fiat-settled business (SPEC Rules 8: "a complete fiat settlement configuration").
 * Each field may be unset while the merchant fills the configuration in; FIAT_SETTLEMENT_REQUIRED_FIELDS says
 * which ones make it complete. The event carries the whole configuration after the change (null: removed).
 */
export interface FiatSettlementDetails {
  /** ISO-4217 settlement currency, upper case: a fiat-settled business prices subscription checkouts in it. */
  readonly currency: string | null;
  readonly beneficiaryName: string | null;
  readonly bankName: string | null;
  /** IBAN, CBU/CVU, CLABE or local account number (letters and digits). */
  readonly accountNumber: string | null;
  /** Routing number, SWIFT/BIC or local bank code, where the account number does not identify the bank. */
  readonly bankCode: string | null;
  /** ISO-3166 alpha-2 country of the bank account. */
  readonly country: string | null;
}

export type FiatSettlementConfigured = {
  type: 'FiatSettlementConfigured.v1';
  data: { fiat: FiatSettlementDetails | null; configuredAt: string };
};

/**
 * The operator turned beta features on or off for the merchant (SPEC Payouts (beta): "must be enabled per account").
 * Carries only the features this change set.
 */
export type MerchantBetaFeaturesSet = {
  type: 'MerchantBetaFeaturesSet.v1';
  data: { features: Partial<Record<BetaFeature, boolean>>; setAt: string };
};

/** Features an operator enables per merchant before its routes answer (docs/payouts.md). */
export const BETA_FEATURES = ['payouts'] as const;
export type BetaFeature = (typeof BETA_FEATURES)[number];

export type MerchantEvent =
  | MerchantCreated
  | MerchantApiKeyReissued
  | MerchantSignerRegistered
  | SettlementAddressChanged
  | MerchantProfileUpdated
  | WebhookSecretIssued
  | WebhookSecretRotated
  | PauserDeclared
  | SubscriptionManagerDeployed
  | MerchantChangedOnChain
  | FiatSettlementConfigured
  | MerchantBetaFeaturesSet;

export const MERCHANT_CATEGORY = 'merchant';
export const merchantStreamId = (merchantId: string): string => `${MERCHANT_CATEGORY}-${merchantId}`;
