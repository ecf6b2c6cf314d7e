import { defineCommands } from '@stablepay/commands';
import type { AuthenticatedMerchant } from '@stablepay/http';

/**
 * The charge commands of the Subscription aggregate, owned by the subscriptions service (SPEC Endpoints >
 * Subscriptions: charge-quote and charge). Payloads and answers are JSON.
 */
export const SUBSCRIPTION_CHARGE_COMMANDS = defineCommands('subscriptions', {
  quote: 'subscriptions.subscription.charge-quote',
  charge: 'subscriptions.subscription.charge',
});

export interface QuoteChargeCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  /** 32-byte hex subscription id, lower case. */
  readonly subscriptionId: string;
  /** Ad-hoc fiat amount in minor units (integer string); null: the plan price. */
  readonly fiatAmount: string | null;
  readonly currency: string | null;
}

export interface ChargeSubscriptionCommand {
  readonly commandId: string;
  readonly merchant: AuthenticatedMerchant;
  readonly subscriptionId: string;
  /** Token smallest units, integer string. */
  readonly amount: string;
  readonly nonce: number;
  /** Unix seconds, integer string, as signed. */
  readonly deadline: string;
  readonly quoteCode: string | null;
  /** The 65-byte EIP-712 signature of signCharge. */
  readonly signature: string;
}

/**
 * The owner's answer to a charge that passed preflight: the `subc_` id of the charge it recorded (the ledger's row
 * id) and its outcome. The gateway answers with the ledger's row once it is listed.
 */
export interface ChargeSubscriptionResult {
  readonly chargeId: string;
  readonly status: 'succeeded' | 'failed';
  /** The subscription stream's revision after the charge was recorded (the caller waits for its read model). */
  readonly revision: number;
  /**
   * True when this call recorded the charge (the revision and the ledger row are new, so the caller's wait can
   * start without reading them first); absent when it answered a charge recorded before.
   */
  readonly appended?: boolean;
}
