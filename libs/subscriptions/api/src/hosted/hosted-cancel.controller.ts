import { Controller, Get, Inject, Param, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { randomBytes } from 'node:crypto';
import { hostedPageHeaders } from '@stablepay/hosted-ui';
import { IgnoreQueryParameters, Public } from '@stablepay/http';
import { cancelPageScripts, renderCancelNotFoundPage, renderCancelPage } from './cancel-page';
import { HOSTED_CANCEL_VIEWS, type HostedCancelViews } from './hosted-cancel.port';

const SUBSCRIPTION_ID = /^0x[0-9a-fA-F]{64}$/;

/**
 * `{hosted_url}/cancel/:subscription_id`, served by the gateway under /hosted. Public: the page only lets the wallet
 * that subscribed send its own on-chain cancel; it shows nothing that is not on chain already, besides the
 * business's name and the way back to it.
 */
@Public()
@Controller('hosted/cancel')
export class HostedCancelController {
  constructor(@Inject(HOSTED_CANCEL_VIEWS) private readonly views: HostedCancelViews) {}

  /** A subscriber's browser opens it from links that carry their own parameters (utm_*): ignored. */
  @Get(':id')
  @IgnoreQueryParameters()
  async page(@Param('id') id: string, @Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    const nonce = randomBytes(16).toString('base64');
    const view = SUBSCRIPTION_ID.test(id) ? await this.views.view(id.toLowerCase()) : null;
    void reply.headers(hostedPageHeaders({ nonce, scripts: view ? cancelPageScripts(view) : [] }));
    if (!view) {
      void reply.status(404);
      return renderCancelNotFoundPage(nonce);
    }
    return renderCancelPage(view, nonce);
  }
}
