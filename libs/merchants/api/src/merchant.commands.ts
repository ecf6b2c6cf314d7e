import type { Mode } from '@stablepay/event-store';
import type { AuthenticatedMerchant } from '@stablepay/http';
import type { FiatSettlementDetails, SettlementMode } from '@stablepay/merchants-domain';

/**
 * The commands of the Merchant aggregate (the wire contract of its use-case handlers, JSON like every scope's),
 * and the owner's answers: the merchant id and the revision its stream reached, so the caller waits for its read
 * model at that revision (read-your-writes), plus what exists only in the answer (a key or secret shown once).
 */
export interface CreateMerchantCommand {
  readonly name: string;
  readonly mode: Mode;
  readonly settlementMode: SettlementMode;
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
}
