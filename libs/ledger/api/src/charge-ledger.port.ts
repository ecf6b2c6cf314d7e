import type { AuthenticatedMerchant, ListEnvelope, ListQuery } from '@stablepay/http';
import type { ChargeListFilter, SubscriptionChargeObject } from '@stablepay/ledger-domain';

/**
 * The inbound port of the charge-ledger scope that the gateway's controllers call (implemented by
 * ChargeLedgerGateway in @stablepay/charge-ledger-service). The ledger has no HTTP command: its rows are written by
 * the charge-ledger service from the subscription charge facts (API path and indexer path), never by a request.
 */
export interface ChargeLedgerUseCases {
  list(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filter: ChargeListFilter,
  ): Promise<ListEnvelope<SubscriptionChargeObject>>;
}

export const CHARGE_LEDGER = Symbol('CHARGE_LEDGER');
