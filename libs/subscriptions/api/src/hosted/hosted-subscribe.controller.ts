import { Body, Controller, Get, HttpCode, Inject, Param, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomBytes } from 'node:crypto';
import { hostedPageHeaders } from '@stablepay/hosted-ui';
import { IgnoreQueryParameters, Public } from '@stablepay/http';
import { SUBSCRIPTION_CHECKOUTS, type SubscriptionCheckoutsUseCases } from '../subscription-checkouts.port';
import { subscribeCall } from '../subscriptions.controller';
import { SubscribeReportLimits } from '../subscribe-report-limits';
import { SUBSCRIPTIONS_USE_CASES, type SubscriptionsUseCases } from '../subscriptions.port';
import { renderNotFoundPage, renderSubscribePage, subscribePageScripts } from './subscribe-page';

const ID = /^schk_[0-9a-z]{26}$/;

/**
 * `{hosted_url}/subscribe/:subscription_checkout_id`, served by the gateway under /hosted (HOSTED_URL is the public
 * address a proxy maps onto it). Public: the id in the link is the customer's capability.
 */
@Public()
@Controller('hosted/subscribe')
export class HostedSubscribeController {
  constructor(
    @Inject(SUBSCRIPTION_CHECKOUTS) private readonly useCases: SubscriptionCheckoutsUseCases,
    @Inject(SUBSCRIPTIONS_USE_CASES) private readonly subscriptions: SubscriptionsUseCases,
    @Inject(SubscribeReportLimits) private readonly reportLimits: SubscribeReportLimits,
  ) {}

  /** A payer's browser opens it from links that carry their own parameters (utm_*): ignored. */
  @Get(':id')
  @IgnoreQueryParameters()
  async page(@Param('id') id: string, @Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    const nonce = randomBytes(16).toString('base64');
    const view = ID.test(id) ? await this.useCases.hostedView(id) : null;
    void reply.headers(hostedPageHeaders({ nonce, scripts: view ? subscribePageScripts(view) : [] }));
    if (!view) {
      void reply.status(404);
      return renderNotFoundPage(nonce);
    }
    return renderSubscribePage(view, nonce);
  }

  /** The customer dismissed the page: cancels a pending intent, then shows its state page (303, relative). */
  @Post(':id/dismiss')
  @HttpCode(303)
  async dismiss(@Param('id') id: string, @Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    if (ID.test(id)) await this.useCases.dismiss(id);
    void reply
      .header('location', `../${encodeURIComponent(id)}`)
      .header('cache-control', 'no-store')
      .header('content-type', 'text/plain; charset=utf-8');
    return 'See Other';
  }

  /**
   * The page's wallet step: the same call as `POST /subscription-checkouts/:id/subscribe`, on the page's own origin
   * (the page's CSP allows connections to it only, and HOSTED_URL may be another host than the API).
   */
  @Post(':id/subscribe')
  @HttpCode(200)
  async subscribe(
    @Param('id') id: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    void reply.header('cache-control', 'no-store');
    return subscribeCall(this.subscriptions, this.reportLimits, id, body, request, reply);
  }
}
