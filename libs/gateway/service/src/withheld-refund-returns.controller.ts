import { Body, Controller, HttpCode, Inject, Param, Post, Req, UseGuards } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { idempotencyKeyOf, Public } from '@stablepay/http';
import { AdminTokenGuard } from '@stablepay/merchants-api';
import { PAYOUTS_USE_CASES, type PayoutsUseCases } from '@stablepay/payouts-api';
import { PAYOUT_ID } from '@stablepay/payouts-domain';
import { notFound } from '@stablepay/util';

const MERCHANT_ID = /^mer_[0-9a-z]{1,64}$/;

/**
 * Operator API: record that the off-ramp returned a payout's withheld refund (docs/payouts.md, "Refund withheld at
 * the off-ramp"), so the payout is `refunded` and `payout.refunded` goes out. Here, as the deposit re-scans, because
 * it is the operator's, behind the merchants scope's AdminTokenGuard; the merchant is in the path and another
 * merchant's payout is 404. Idempotency-Key honoured (a retry answers the refunded payout).
 */
@Public()
@UseGuards(AdminTokenGuard)
@Controller('admin/merchants/:merchantId/payouts')
export class WithheldRefundReturnsController {
  constructor(@Inject(PAYOUTS_USE_CASES) private readonly payouts: PayoutsUseCases) {}

  @Post(':id/withheld-refund-returns')
  @HttpCode(200)
  record(
    @Param('merchantId') merchantId: string,
    @Param('id') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    // An unknown merchant cannot own the payout: the same 404 as another merchant's.
    if (!MERCHANT_ID.test(merchantId) || !PAYOUT_ID.test(id)) throw notFound('payout', id);
    return this.payouts.recordWithheldRefundReturn(merchantId, id, body ?? {}, idempotencyKeyOf(request));
  }
}
