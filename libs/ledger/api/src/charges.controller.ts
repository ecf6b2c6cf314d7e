import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import {
  assertOwnMerchant,
  type AuthenticatedMerchant,
  CurrentMerchant,
  QueryParameters,
} from '@stablepay/http';
import { CHARGE_LEDGER, type ChargeLedgerUseCases } from './charge-ledger.port';
import { CHARGE_LIST_PARAMETERS, parseChargeListQuery } from './list-query';

/**
 * SPEC Endpoints > Subscription charges: the merchant's charge ledger, newest first by the ledger's own sequence
 * (Pagination rule 6), filtered by subscription, subscriber, status, chain and a charged_at range.
 */
@Controller('merchants/:merchantId/charges')
export class ChargesController {
  constructor(@Inject(CHARGE_LEDGER) private readonly ledger: ChargeLedgerUseCases) {}

  @Get()
  @QueryParameters(CHARGE_LIST_PARAMETERS)
  list(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('merchantId') merchantId: string,
    @Query() query: Record<string, unknown>,
  ) {
    assertOwnMerchant(merchant, merchantId);
    const { list, filter } = parseChargeListQuery(query);
    return this.ledger.list(merchant, list, filter);
  }
}
