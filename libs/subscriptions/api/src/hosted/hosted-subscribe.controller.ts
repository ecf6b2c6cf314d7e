import { Controller, Get, HttpCode, Inject, Param, Post, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { randomBytes } from 'node:crypto';
import { Public } from '@stablepay/http';
import { SUBSCRIPTION_CHECKOUTS, type SubscriptionCheckoutsUseCases } from '../subscription-checkouts.port';
import { renderNotFoundPage, renderSubscribePage } from './subscribe-page';

const ID = /^schk_[0-9a-z]{26}$/;

/** Headers of every hosted page: no caching, no framing, no referrer (the URL names the intent), strict CSP. */
function pageHeaders(reply: FastifyReply, nonce: string): void {
  void reply
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('x-content-type-options', 'nosniff')
    .header(
      'content-security-policy',
      `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
    );
}

/**
 * `{hosted_url}/subscribe/:subscription_checkout_id`, served by the gateway under /hosted (HOSTED_URL is the public
 * address a proxy maps onto it). Public: the id in the link is the customer's capability.
 */
@Public()
@Controller('hosted/subscribe')
export class HostedSubscribeController {
  constructor(@Inject(SUBSCRIPTION_CHECKOUTS) private readonly useCases: SubscriptionCheckoutsUseCases) {}

  @Get(':id')
  async page(@Param('id') id: string, @Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    const nonce = randomBytes(16).toString('base64');
    pageHeaders(reply, nonce);
    const view = ID.test(id) ? await this.useCases.hostedView(id) : null;
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
}
