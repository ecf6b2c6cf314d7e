import { Inject, Injectable } from '@nestjs/common';
import { type AuthenticatedMerchant, type ListEnvelope, listEnvelope, type ListQuery } from '@stablepay/http';
import type { ChargeLedgerUseCases, ChargeSettlementExposureListItem } from '@stablepay/ledger-api';
import type { ChargeListFilter, SubscriptionChargeObject } from '@stablepay/ledger-domain';
import { ChargeLedgerReader, type ChargeSettlementExposureRow } from './charges/charge-ledger.reader';

/** The gateway's side of the ledger port: reads the ledger read model in-process (the ledger takes no commands). */
@Injectable()
export class ChargeLedgerGateway implements ChargeLedgerUseCases {
  constructor(@Inject(ChargeLedgerReader) private readonly reader: ChargeLedgerReader) {}

  async list(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filter: ChargeListFilter,
  ): Promise<ListEnvelope<SubscriptionChargeObject>> {
    const { rows, hasMore } = await this.reader.list(merchant, query, filter);
    return listEnvelope(
      rows.map((r) => r.object),
      hasMore,
    );
  }

  async listSettlementExposures(
    query: ListQuery,
    filters: { readonly mode?: 'test' | 'live' },
  ): Promise<ListEnvelope<ChargeSettlementExposureListItem>> {
    const { rows, hasMore } = await this.reader.listSettlementExposures(query, filters);
    return listEnvelope(rows.map(exposureItem), hasMore);
  }
}

/** The row's columns are the item's fields; its id is the charge's. */
const exposureItem = ({ id, ...fields }: ChargeSettlementExposureRow): ChargeSettlementExposureListItem => ({
  object: 'charge_settlement_exposure',
  charge_id: id,
  ...fields,
});
