import type { AuthenticatedMerchant, ListEnvelope, ListQuery } from '@stablepay/http';
import type { ChargeListFilter, SubscriptionChargeObject } from '@stablepay/ledger-domain';

/**
 * Operator API (GET /admin/charge-settlement-exposures): one subscription charge whose fiat payout stands for a charge
 * a reorg took, across merchants. `amount` in `currency` is what the payout paid out (fiat minor units); `charge_id`
 * is the list's cursor.
 */
export interface ChargeSettlementExposureListItem {
  readonly object: 'charge_settlement_exposure';
  readonly charge_id: string;
  readonly subscription_id: string;
  readonly merchant_id: string;
  readonly mode: 'test' | 'live';
  readonly amount: string;
  readonly currency: string;
  readonly reason: 'charge_lost_to_reorg';
  readonly recorded_at: string;
}

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
  /** Operator (ADMIN_TOKEN): the open settlement exposures of every merchant's charges, newest row first. */
  listSettlementExposures(
    query: ListQuery,
    filters: { readonly mode?: 'test' | 'live' },
  ): Promise<ListEnvelope<ChargeSettlementExposureListItem>>;
}

export const CHARGE_LEDGER = Symbol('CHARGE_LEDGER');
