import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import { type AuthenticatedMerchant, CurrentMerchant, QueryParameters } from '@stablepay/http';
import { notFound } from '@stablepay/util';
import { PAYMENT_ID, PAYMENT_LIST_PARAMETERS, parsePaymentListQuery } from './list-query';
import { PAYMENTS_USE_CASES, type PaymentsUseCases } from './payments.port';

export function checkPaymentId(id: string): string {
  if (!PAYMENT_ID.test(id)) throw notFound('payment', id);
  return id;
}

/**
 * SPEC Endpoints > Payments, the reads: the payment object. (`/payments/settlement` is a static route of the
 * merchants scope and wins over `:paymentId`; the signed actions live in their own controller.)
 */
@Controller('payments')
export class PaymentsController {
  constructor(@Inject(PAYMENTS_USE_CASES) private readonly useCases: PaymentsUseCases) {}

  @Get()
  @QueryParameters(PAYMENT_LIST_PARAMETERS)
  list(@CurrentMerchant() merchant: AuthenticatedMerchant, @Query() query: Record<string, unknown>) {
    const { list, filters } = parsePaymentListQuery(query);
    return this.useCases.listPayments(merchant, list, filters);
  }

  @Get(':paymentId')
  retrieve(@CurrentMerchant() merchant: AuthenticatedMerchant, @Param('paymentId') id: string) {
    return this.useCases.retrievePayment(merchant, checkPaymentId(id));
  }
}
