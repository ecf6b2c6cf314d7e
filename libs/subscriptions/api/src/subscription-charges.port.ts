import type { AuthenticatedMerchant } from '@stablepay/http';
import type { ChargeQuoteObject } from '@stablepay/subscriptions-domain';

export interface ChargeQuoteInput {
  readonly fiatAmount: string | null;
  readonly currency: string | null;
}

export interface ChargeInput {
  readonly amount: string;
  readonly nonce: number;
  readonly deadline: string;
  readonly quoteCode: string | null;
  readonly signature: string;
}

/**
 * The inbound port of `POST /subscriptions/:id/charge-quote` and `POST /subscriptions/:id/charge`. The charge answers
 * with the `subscription_charge` of the charge ledger (typed structurally: the subscriptions scope does not import the
 * ledger's), returned once the ledger lists it (SPEC fiat field rule 6).
 */
export interface SubscriptionChargesUseCases {
  quote(
    merchant: AuthenticatedMerchant,
    subscriptionId: string,
    input: ChargeQuoteInput,
  ): Promise<ChargeQuoteObject>;
  charge(
    merchant: AuthenticatedMerchant,
    subscriptionId: string,
    input: ChargeInput,
    idempotencyKey?: string,
  ): Promise<{ readonly object: 'subscription_charge'; readonly id: string; readonly status: string }>;
}

export const SUBSCRIPTION_CHARGES = Symbol('SUBSCRIPTION_CHARGES');
