import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { CLOCK } from '@stablepay/aggregate';
import { chargeFilterClauses } from '@stablepay/charge-ledger-service';
import { type AuthenticatedMerchant, type Clause, exportRows } from '@stablepay/http';
import type { ChargeListFilter, SubscriptionChargeObject } from '@stablepay/ledger-domain';
import type { PaymentListFilters, PaymentObject } from '@stablepay/payments-domain';
import { paymentFilterClauses } from '@stablepay/payments-service';
import type { ChargeReportRow, ReportRows, ReportsUseCases } from '@stablepay/reports-api';
import {
  ChainTime,
  rowWindowFacts,
  SUBSCRIPTION_ROW_COLUMNS,
  subscriptionFilterClauses,
  type SubscriptionRow,
} from '@stablepay/subscriptions-service';
import {
  type SubscriptionListFilters,
  type SubscriptionObject,
  subscriptionObjectAt,
} from '@stablepay/subscriptions-domain';
import type { Clock } from '@stablepay/util';

const ownedBy = (table: string, merchant: AuthenticatedMerchant): Clause[] => [
  (p) => `${table}.merchant_id = ${p(merchant.merchantId)}`,
  (p) => `${table}.mode = ${p(merchant.mode)}`,
];

/**
 * The reports' read side: each export reads one scope's read model (the table its list reads, with the list's own
 * filter SQL) within the key's merchant and mode, oldest first by the list's sequence. Read-only; the charges export
 * joins the subscriptions read model for the token an amount is counted in.
 */
@Injectable()
export class ReportsGateway implements ReportsUseCases {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(ChainTime) private readonly chains: ChainTime,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  payments(merchant: AuthenticatedMerchant, filters: PaymentListFilters): ReportRows<PaymentObject> {
    const rows = exportRows<{ object: PaymentObject }>(this.dataSource, {
      label: 'payments',
      table: 'payments',
      select: 'payments.seq, payments.object',
      where: [...ownedBy('payments', merchant), ...paymentFilterClauses(filters)],
    });
    return { rows: mapRows(rows, (r) => r.object), startedAt: this.clock.now() };
  }

  subscriptions(
    merchant: AuthenticatedMerchant,
    filters: SubscriptionListFilters,
  ): ReportRows<SubscriptionObject> {
    const rows = exportRows<SubscriptionRow>(this.dataSource, {
      label: 'subscriptions',
      table: 'subscriptions',
      select: SUBSCRIPTION_ROW_COLUMNS.replace(/^\*/, 'subscriptions.*'),
      where: [...ownedBy('subscriptions', merchant), ...subscriptionFilterClauses(filters)],
    });
    // The window fields follow the chain's time, as GET /subscriptions shows them (ChainTime caches per chain).
    return {
      rows: mapRows(rows, async (row) =>
        subscriptionObjectAt(row.object, rowWindowFacts(row), await this.chains.now(row.mode, row.chain)),
      ),
      startedAt: this.clock.now(),
    };
  }

  subscriptionCharges(
    merchant: AuthenticatedMerchant,
    filter: ChargeListFilter,
  ): ReportRows<ChargeReportRow> {
    const rows = exportRows<{
      object: SubscriptionChargeObject;
      asset: string | null;
      token_symbol: string | null;
      token_decimals: number | null;
    }>(this.dataSource, {
      label: 'subscription-charges',
      table: 'subscription_charges',
      select: `subscription_charges.seq, subscription_charges.object, s.object->>'asset' AS asset,
        s.object->>'token_symbol' AS token_symbol, (s.object->>'token_decimals')::int AS token_decimals`,
      join: `LEFT JOIN subscriptions s ON s.id = subscription_charges.subscription_id
        AND s.merchant_id = subscription_charges.merchant_id AND s.mode = subscription_charges.mode`,
      where: [
        ...ownedBy('subscription_charges', merchant),
        ...chargeFilterClauses(filter, 'subscription_charges'),
      ],
    });
    return {
      rows: mapRows(rows, (r) => ({
        charge: r.object,
        asset: r.asset,
        token_symbol: r.token_symbol,
        token_decimals: r.token_decimals,
      })),
      startedAt: this.clock.now(),
    };
  }
}

async function* mapRows<In, Out>(
  batches: AsyncIterable<readonly In[]>,
  map: (row: In) => Out | Promise<Out>,
): AsyncGenerator<Out[]> {
  for await (const batch of batches) {
    const out: Out[] = [];
    for (const row of batch) out.push(await map(row));
    yield out;
  }
}
