import { Controller, Get, Inject, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  type AuthenticatedMerchant,
  type CsvColumn,
  CurrentMerchant,
  type ExportSlots,
  QueryParameters,
  sendCsv,
  sendCsvHead,
} from '@stablepay/http';
import { CHARGE_FILTER_PARAMETERS, parseChargeListFilter } from '@stablepay/ledger-domain';
import { PAYMENT_FILTER_PARAMETERS, parsePaymentListFilters } from '@stablepay/payments-domain';
import {
  parseSubscriptionListFilters,
  SUBSCRIPTION_FILTER_PARAMETERS,
} from '@stablepay/subscriptions-domain';
import { PAYMENT_COLUMNS, SUBSCRIPTION_CHARGE_COLUMNS, SUBSCRIPTION_COLUMNS } from './report-columns';
import {
  REPORT_EXPORT_SLOTS,
  type ReportRows,
  REPORTS_USE_CASES,
  type ReportsUseCases,
} from './reports.port';

/**
 * SPEC Endpoints > Reports: CSV exports of the merchant's payments, subscriptions and subscription charges, in the
 * key's mode, filtered as the matching lists are (the same parsers), oldest first (docs/reports.md). Parameters are
 * checked and a slot is taken before anything is read, so a bad parameter or a third concurrent export is an error
 * in the envelope, never a CSV.
 */
@Controller('reports')
export class ReportsController {
  constructor(
    @Inject(REPORTS_USE_CASES) private readonly reports: ReportsUseCases,
    @Inject(REPORT_EXPORT_SLOTS) private readonly slots: ExportSlots,
  ) {}

  @Get('payments/export')
  @QueryParameters(PAYMENT_FILTER_PARAMETERS)
  payments(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Query() query: Record<string, unknown>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const filters = parsePaymentListFilters(query);
    return this.send(request, reply, merchant, 'payments', PAYMENT_COLUMNS, () =>
      this.reports.payments(merchant, filters),
    );
  }

  @Get('subscriptions/export')
  @QueryParameters(SUBSCRIPTION_FILTER_PARAMETERS)
  subscriptions(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Query() query: Record<string, unknown>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const filters = parseSubscriptionListFilters(query);
    return this.send(request, reply, merchant, 'subscriptions', SUBSCRIPTION_COLUMNS, () =>
      this.reports.subscriptions(merchant, filters),
    );
  }

  @Get('subscription-charges/export')
  @QueryParameters(CHARGE_FILTER_PARAMETERS)
  subscriptionCharges(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Query() query: Record<string, unknown>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const filter = parseChargeListFilter(query);
    return this.send(request, reply, merchant, 'subscription-charges', SUBSCRIPTION_CHARGE_COLUMNS, () =>
      this.reports.subscriptionCharges(merchant, filter),
    );
  }

  private async send<Row>(
    request: FastifyRequest,
    reply: FastifyReply,
    merchant: AuthenticatedMerchant,
    report: string,
    columns: readonly CsvColumn<Row>[],
    read: () => ReportRows<Row>,
  ): Promise<void> {
    const filename = (startedAt: Date) =>
      `${report}-${merchant.mode}-${startedAt.toISOString().slice(0, 10)}.csv`;
    // The rows are read only when iterated: a HEAD takes the start date and no slot, and reads nothing.
    if (request.method === 'HEAD') return sendCsvHead(reply, filename(read().startedAt));
    const release = await this.slots.take(merchant.merchantId, request, reply);
    try {
      const { rows, startedAt } = read();
      await sendCsv(reply, { report, filename: filename(startedAt), columns, rows }, release);
    } catch (error) {
      release();
      throw error;
    }
  }
}
