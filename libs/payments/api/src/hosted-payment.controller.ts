import { Controller, Get, Inject, Param } from '@nestjs/common';
import { Public } from '@stablepay/http';
import { notFound } from '@stablepay/util';
import { CHECKOUT_ID } from './list-query';
import { PAYMENTS_USE_CASES, type PaymentsUseCases } from './payments.port';

/**
 * The public read behind the hosted payment page (`{hosted_url}/pay/:checkout_id`): no API key, only what the
 * page shows (docs/openapi.yaml `HostedPaymentStatus`). The checkout id is the capability: unguessable (26
 * random or hash-derived characters) and handed to the customer by the merchant.
 */
@Public()
@Controller('hosted/pay')
export class HostedPaymentController {
  constructor(@Inject(PAYMENTS_USE_CASES) private readonly useCases: PaymentsUseCases) {}

  @Get(':id/status')
  async status(@Param('id') id: string) {
    if (!CHECKOUT_ID.test(id)) throw notFound('checkout', id);
    const view = await this.useCases.hostedStatus(id);
    if (!view) throw notFound('checkout', id);
    return view;
  }
}
