import { Controller, Get, Inject, Query, UseGuards } from '@nestjs/common';
import { Public, QueryParameters } from '@stablepay/http';
import { CHARGE_LEDGER, type ChargeLedgerUseCases } from '@stablepay/ledger-api';
import { AdminTokenGuard } from '@stablepay/merchants-api';
import {
  parseSettlementExposureListQuery,
  SETTLEMENT_EXPOSURE_LIST_PARAMETERS,
} from '@stablepay/payments-api';

/**
 * Operator API: the open settlement exposures of every merchant's subscription charges (docs/subscriptions.md,
 * Reorgs): charges whose fiat payout the provider made for a charge a reorg took, each with the amount to recover.
 * A sibling of GET /admin/settlement-exposures (payments): each list pages its own read model by its own ids, with the
 * same parameters (SPEC's list rules, `mode`), behind the merchants scope's AdminTokenGuard.
 */
@Public()
@UseGuards(AdminTokenGuard)
@Controller('admin/charge-settlement-exposures')
export class ChargeSettlementExposuresController {
  constructor(@Inject(CHARGE_LEDGER) private readonly ledger: ChargeLedgerUseCases) {}

  @Get()
  @QueryParameters(SETTLEMENT_EXPOSURE_LIST_PARAMETERS)
  list(@Query() query: Record<string, unknown>) {
    const { list, filters } = parseSettlementExposureListQuery(query);
    return this.ledger.listSettlementExposures(list, filters);
  }
}
