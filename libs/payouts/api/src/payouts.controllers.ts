import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req, UseGuards } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import {
  type AuthenticatedMerchant,
  CurrentMerchant,
  idempotencyKeyOf,
  QueryParameters,
  requestOrigin,
} from '@stablepay/http';
import { BENEFICIARY_ID, CUSTOMER_ID, PAYOUT_ID } from '@stablepay/payouts-domain';
import { notFound } from '@stablepay/util';
import { PayoutsBetaGuard } from './beta.guard';
import {
  CreateBeneficiaryDto,
  CreateCustomerDto,
  CreatePayoutDto,
  definedFields,
  RefundHeldDto,
  SimulateDepositDto,
} from './dtos';
import {
  BENEFICIARY_LIST_PARAMETERS,
  CUSTOMER_LIST_PARAMETERS,
  parseCustomerListQuery,
  parsePayoutListQuery,
  PAYOUT_LIST_PARAMETERS,
} from './list-query';
import { PAYOUTS_USE_CASES, type PayoutsUseCases } from './payouts.port';
import { parseListQuery } from '@stablepay/http';

/** A malformed id is as unknown as a made-up one (and as another merchant's): 404 before anything runs. */
function checkId(pattern: RegExp, resource: string, id: string): string {
  if (!pattern.test(id)) throw notFound(resource, id);
  return id;
}

/** SPEC Endpoints > Payouts (beta): customers. Bodies are ours (SPEC: "not shown"), in docs/openapi.yaml. */
@UseGuards(PayoutsBetaGuard)
@Controller('customers')
export class CustomersController {
  constructor(@Inject(PAYOUTS_USE_CASES) private readonly useCases: PayoutsUseCases) {}

  /** Creates a customer: status kyc_pending, its kyc_url and its deposit_addresses. */
  @Post()
  @HttpCode(201)
  create(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: CreateCustomerDto,
    @Req() request: FastifyRequest,
  ) {
    return this.useCases.createCustomer(
      merchant,
      definedFields(body),
      requestOrigin(request),
      idempotencyKeyOf(request),
    );
  }

  @Get()
  @QueryParameters(CUSTOMER_LIST_PARAMETERS)
  list(@CurrentMerchant() merchant: AuthenticatedMerchant, @Query() query: Record<string, unknown>) {
    const { list, filters } = parseCustomerListQuery(query);
    return this.useCases.listCustomers(merchant, list, filters);
  }

  @Get(':id')
  retrieve(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string) {
    return this.useCases.retrieveCustomer(merchant, checkId(CUSTOMER_ID, 'customer', id));
  }

  /**
   * Like Stripe's Account Links: a fresh hosted KYC link (24 h) for a customer whose link expired or was lost; the
   * previous link then records nothing. Answers the customer with its new `kyc_url` and `kyc_url_expires_at`.
   */
  @Post(':id/kyc_links')
  @HttpCode(201)
  issueKycLink(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Req() request: FastifyRequest,
  ) {
    return this.useCases.issueKycLink(
      merchant,
      checkId(CUSTOMER_ID, 'customer', id),
      idempotencyKeyOf(request),
    );
  }
}

/** SPEC Endpoints > Payouts (beta): beneficiaries (bank accounts receiving fiat). */
@UseGuards(PayoutsBetaGuard)
@Controller('beneficiaries')
export class BeneficiariesController {
  constructor(@Inject(PAYOUTS_USE_CASES) private readonly useCases: PayoutsUseCases) {}

  @Post()
  @HttpCode(201)
  create(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: CreateBeneficiaryDto,
    @Req() request: FastifyRequest,
  ) {
    return this.useCases.createBeneficiary(merchant, definedFields(body), idempotencyKeyOf(request));
  }

  @Get()
  @QueryParameters(BENEFICIARY_LIST_PARAMETERS)
  list(@CurrentMerchant() merchant: AuthenticatedMerchant, @Query() query: Record<string, unknown>) {
    return this.useCases.listBeneficiaries(merchant, parseListQuery(query));
  }

  @Get(':id')
  retrieve(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string) {
    return this.useCases.retrieveBeneficiary(merchant, checkId(BENEFICIARY_ID, 'beneficiary', id));
  }
}

/** SPEC Endpoints > Payouts (beta): payouts; rejected for customers that are not active (422 customer_not_active). */
@UseGuards(PayoutsBetaGuard)
@Controller('payouts')
export class PayoutsController {
  constructor(@Inject(PAYOUTS_USE_CASES) private readonly useCases: PayoutsUseCases) {}

  @Post()
  @HttpCode(201)
  create(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: CreatePayoutDto,
    @Req() request: FastifyRequest,
  ) {
    return this.useCases.createPayout(merchant, definedFields(body), idempotencyKeyOf(request));
  }

  @Get()
  @QueryParameters(PAYOUT_LIST_PARAMETERS)
  list(@CurrentMerchant() merchant: AuthenticatedMerchant, @Query() query: Record<string, unknown>) {
    const { list, filters } = parsePayoutListQuery(query);
    return this.useCases.listPayouts(merchant, list, filters);
  }

  @Get(':id')
  retrieve(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('id') id: string) {
    return this.useCases.retrievePayout(merchant, checkId(PAYOUT_ID, 'payout', id));
  }

  /**
   * Returns a held payout's deposit (failed `customer_not_active`) from the deposit address to the wallet it came
   * from, with the merchant signer's PayoutRefund; answers the payout, `refunded` (docs/payouts.md "Held funds").
   */
  @Post(':id/refund_held')
  @HttpCode(200)
  refundHeld(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Body() body: RefundHeldDto,
    @Req() request: FastifyRequest,
  ) {
    return this.useCases.refundHeld(
      merchant,
      checkId(PAYOUT_ID, 'payout', id),
      definedFields(body),
      idempotencyKeyOf(request),
    );
  }
}

/**
 * Test helpers (test-mode keys only; a live key gets 404): what the outside world would do, on demand, the way
 * Stripe's test helpers work. Crypto arriving at a customer's deposit address takes the same path as a deposit the
 * chain reports (docs/payouts.md).
 */
@UseGuards(PayoutsBetaGuard)
@Controller('test_helpers/customers')
export class PayoutTestHelpersController {
  constructor(@Inject(PAYOUTS_USE_CASES) private readonly useCases: PayoutsUseCases) {}

  @Post(':id/deposits')
  @HttpCode(200)
  deposit(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('id') id: string,
    @Body() body: SimulateDepositDto,
    @Req() request: FastifyRequest,
  ) {
    if (merchant.mode !== 'test') throw notFound('customer', id);
    return this.useCases.simulateDeposit(
      merchant,
      checkId(CUSTOMER_ID, 'customer', id),
      definedFields(body),
      idempotencyKeyOf(request),
    );
  }
}
