import { Controller, Get, Inject, Query, UseGuards } from '@nestjs/common';
import { Public, QueryParameters } from '@stablepay/http';
import { AdminTokenGuard } from '@stablepay/merchants-api';
import {
  PAYMENTS_USE_CASES,
  parseSettlementExposureListQuery,
  type PaymentsUseCases,
  SETTLEMENT_EXPOSURE_LIST_PARAMETERS,
} from '@stablepay/payments-api';

/**
 * Operator API: the open settlement exposures of every merchant (docs/payments.md, "Fiat settlement"): payments
 * whose fiat payout the provider made for a deposit a reorg then took, each with the amount to recover from that
 * merchant's next settlements. Across merchants, so here behind the merchants scope's AdminTokenGuard and not on a
 * merchant's key. SPEC's list rules (newest first, both cursors refused); `mode` narrows to test or live payments.
 */
@Public()
@UseGuards(AdminTokenGuard)
@Controller('admin/settlement-exposures')
export class SettlementExposuresController {
  constructor(@Inject(PAYMENTS_USE_CASES) private readonly payments: PaymentsUseCases) {}

  @Get()
  @QueryParameters(SETTLEMENT_EXPOSURE_LIST_PARAMETERS)
  list(@Query() query: Record<string, unknown>) {
    const { list, filters } = parseSettlementExposureListQuery(query);
    return this.payments.listSettlementExposures(list, filters);
  }
}
