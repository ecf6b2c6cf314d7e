import type { Mode } from '@stablepay/event-store';
import type { AuthenticatedMerchant } from '@stablepay/http';
import { defineCommands } from '@stablepay/commands';
import type { FiatSettlementDetails, SettlementMode } from '@stablepay/merchants-domain';

/**
 * Merchant commands that need the operator key, so they go to the process holding it and the merchant registration
 * on chain (the payments service; docs/chain-operator.md): the gateway never holds the key.
 */
export const MERCHANT_CHAIN_COMMANDS = defineCommands('payments', {
  changeMerchant: 'payments.merchant-chain.change',
  revokeAuthorizations: 'payments.merchant-chain.revoke-authorizations',
});

/**
 * POST /settings/revoke-authorizations: relay, chain by chain, a RevokeAuthorizations signed by the merchant signer
 * each chain holds; the registry bumps the merchant's epoch there, so every signature made before stops working.
 */
export interface RevokeAuthorizationsCommand {
  readonly merchant: AuthenticatedMerchant;
  readonly revocations: ReadonlyArray<RevocationInput>;
}

export interface RevocationInput {
  /** CAIP-2 id as sent (canonicalised by the owner). */
  readonly chain: string;
  /** Unix seconds, as a decimal string. */
  readonly deadline: string;
  readonly signature: string;
}

/**
 * Per chain: `revoked` (relayed now, `tx_hash`), `already_revoked` (the signature names the epoch just before the
 * chain's current one: this revocation, or another, already happened; nothing was sent). `epoch` is the merchant's
 * epoch on that chain now; signatures must name it from here on.
 */
export interface RevokeAuthorizationsResult {
  readonly object: 'authorization_revocation';
  readonly revocations: ReadonlyArray<{
    readonly chain: string;
    readonly status: 'revoked' | 'already_revoked';
    readonly epoch: string;
    readonly tx_hash: string | null;
  }>;
}

/**
 * POST /settings/merchant-change: relay a MerchantChange signed by the signer the chain holds, bringing the chain's
 * signer and settlement address to the settings' values.
 */
export interface ChangeMerchantOnChainCommand {
  readonly merchant: AuthenticatedMerchant;
  /** Canonical CAIP-2 id. */
  readonly chain: string;
  /** Unix seconds, as a decimal string. */
  readonly deadline: string;
  readonly signature: string;
  /** When sent, must equal the settings' values (the change only ever brings the settings on chain). */
  readonly merchantSigner?: string;
  readonly settlementAddress?: string;
}

/**
 * `changed`: relayed now (`txHash`); `unchanged`: the chain held the settings' values already, nothing was sent
 * (a retry after the change landed answers this). `revision`: the merchant stream's after the recorded fact.
 */
export interface ChangeMerchantOnChainResult extends MerchantCommandResult {
  readonly chain: string;
  readonly outcome: 'changed' | 'unchanged';
  readonly txHash: string | null;
}

/**
 * The commands of the Merchant aggregate (the wire contract of its use-case handlers, JSON like every scope's),
 * and the owner's answers: the merchant id and the revision its stream reached, so the caller waits for its read
 * model at that revision (read-your-writes), plus what exists only in the answer (a key or secret shown once).
 */
export interface CreateMerchantCommand {
  readonly name: string;
  readonly mode: Mode;
  readonly settlementMode: SettlementMode;
  /** The Idempotency-Key's command id: the merchant's id derives from it (a retry finds its first attempt's). */
  readonly commandId?: string;
  /**
   * When the Idempotency-Key was claimed for this attempt (ISO): an attempt that began before the key a later attempt
   * issued is stale, however late it reaches the command. Absent: the command's own time.
   */
  readonly attemptStartedAt?: string;
}

export interface RegisterSignerCommand {
  readonly merchant: AuthenticatedMerchant;
  readonly merchantSigner: string;
  readonly settlementAddress?: string;
}

export interface UpdateSettlementAddressCommand {
  readonly merchant: AuthenticatedMerchant;
  readonly settlementAddress: string;
}

export interface UpdateProfileCommand {
  readonly merchant: AuthenticatedMerchant;
  readonly displayName?: string;
  readonly webhookUrl?: string | null;
  readonly backgroundColor?: string | null;
  readonly primaryColor?: string | null;
  readonly webhookEventTypes?: string[] | null;
}

export interface RotateWebhookSecretCommand {
  readonly merchant: AuthenticatedMerchant;
  /** The request's Idempotency-Key command id: the rotation's secret id derives from it. */
  readonly commandId?: string;
}

export interface DeclarePauserCommand {
  readonly merchant: AuthenticatedMerchant;
  readonly merchantPauser: string;
  readonly signature: string;
  readonly acknowledgeSharedPauserRisk: boolean;
}

export interface ConfigureSettlementCommand {
  readonly merchant: AuthenticatedMerchant;
  readonly settlementAddress?: string;
  readonly fiat?: Partial<FiatSettlementDetails> | null;
}

/** POST /admin/merchants/:merchantId/beta-features (operator API). */
export interface SetBetaFeaturesCommand {
  readonly merchantId: string;
  readonly features: Record<string, unknown>;
}

export interface MerchantCommandResult {
  readonly id: string;
  readonly revision: number;
}

/** The secret API key is in this answer only, never stored in clear. */
export interface CreateMerchantResult extends MerchantCommandResult {
  readonly apiKey: string;
}

/** Set when this update issued the first webhook secret (shown once). */
export interface UpdateProfileResult extends MerchantCommandResult {
  readonly issuedSecret?: string;
}

export interface RotateWebhookSecretResult extends MerchantCommandResult {
  readonly secret: string;
  /** When the secret this rotation replaced stops signing, as this rotation's event recorded it. */
  readonly previousSecretExpiresAt: Date;
}
