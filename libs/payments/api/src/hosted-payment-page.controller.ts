import { Controller, Get, Inject, Param, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { randomBytes } from 'node:crypto';
import { LIVE_CHAINS } from '@stablepay/evm';
import {
  depositToOffer,
  hostedPageHeaders,
  payPageScripts,
  qrSvg,
  renderPayNotFoundPage,
  renderPayPage,
} from '@stablepay/hosted-ui';
import { IgnoreQueryParameters, Public } from '@stablepay/http';
import { CHECKOUT_ID } from './list-query';
import { PAYMENTS_USE_CASES, type PaymentsUseCases } from './payments.port';

/** Display names by CAIP-2 (local test chains run under the same ids as the chains they stand in for). */
const CHAIN_NAMES: Readonly<Record<string, string>> = Object.fromEntries(
  LIVE_CHAINS.map((c) => [`eip155:${c.chainId.toString()}`, c.name]),
);

/**
 * The hosted payment page `{hosted_url}/pay/:checkout_id` (docs/hosted-pages.md): rendered from the same public
 * status read the page then polls (`GET /hosted/pay/:id/status`), so it shows nothing the status read does not.
 */
@Public()
@Controller('hosted/pay')
export class HostedPaymentPageController {
  constructor(@Inject(PAYMENTS_USE_CASES) private readonly useCases: PaymentsUseCases) {}

  /** A payer's browser opens it from links that carry their own parameters (utm_*): ignored. */
  @Get(':id')
  @IgnoreQueryParameters()
  async page(@Param('id') id: string, @Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    const nonce = randomBytes(16).toString('base64');
    const view = CHECKOUT_ID.test(id) ? await this.useCases.hostedStatus(id) : null;
    void reply.headers(hostedPageHeaders({ nonce, scripts: view ? payPageScripts(view) : [] }));
    if (!view) {
      void reply.status(404);
      return renderPayNotFoundPage(nonce);
    }
    const deposit = depositToOffer(view);
    return renderPayPage(view, {
      nonce,
      chainNames: CHAIN_NAMES,
      qrSvg: deposit === null ? '' : await qrSvg(deposit),
    });
  }
}
