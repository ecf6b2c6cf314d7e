import { Controller, Get, HttpCode, Inject, Param, Post, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { randomBytes } from 'node:crypto';
import { escapeHtml as e, hostedPage, hostedPageHeaders, palette } from '@stablepay/hosted-ui';
import { IgnoreQueryParameters, Public } from '@stablepay/http';
import { KYC_SESSION_ID } from '@stablepay/payouts-domain';
import { type HostedKycView, PAYOUTS_USE_CASES, type PayoutsUseCases } from './payouts.port';

const MESSAGES: Readonly<Record<Exclude<HostedKycView['state'], 'open'>, string>> = {
  used: 'This verification link was already used. Ask the business for a new one if it still needs you.',
  expired: 'This verification link has expired. Ask the business for a new one.',
  active: 'Your identity is verified. You can close this page.',
  action_required: 'We need more information from you. The business will send you a new verification link.',
  kyc_failed: 'We could not verify your identity.',
  suspended: 'This account is suspended.',
};

export function renderKycPage(view: HostedKycView | null, nonce: string): string {
  const colors = palette(view?.backgroundColor ?? null, view?.primaryColor ?? null);
  if (!view)
    return hostedPage({
      title: 'Link not found',
      businessName: 'Stablepay',
      colors,
      nonce,
      status: 'not_found',
      body: '<div class="state"><h1>Link not found</h1><p class="muted">Check the link you were given.</p></div>',
    });
  const body =
    view.state === 'open'
      ? `<h1>Verify your identity</h1>
<p class="muted">${e(view.businessName)} uses Stablepay to pay out to your bank account. Sandbox verification: no
documents are needed; completing the step submits the details the business registered.</p>
<form method="post" action="" enctype="text/plain">
  <button type="submit" class="button" data-testid="complete-kyc">Complete verification</button>
</form>`
      : `<div class="state"><h1>Identity verification</h1><p class="muted">${e(MESSAGES[view.state])}</p></div>`;
  return hostedPage({
    title: 'Identity verification',
    businessName: view.businessName,
    colors,
    nonce,
    status: view.state,
    body,
  });
}

/**
 * The hosted KYC page `{hosted_url}/kyc/:session` (sandbox KYC, docs/payouts.md), served under /hosted like the
 * other hosted pages. Public: the session id in the link is the customer's capability; it works once and expires.
 */
@Public()
@Controller('hosted/kyc')
export class HostedKycController {
  constructor(@Inject(PAYOUTS_USE_CASES) private readonly useCases: PayoutsUseCases) {}

  @Get(':session')
  @IgnoreQueryParameters()
  async page(
    @Param('session') session: string,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<string> {
    const nonce = randomBytes(16).toString('base64');
    const view = KYC_SESSION_ID.test(session) ? await this.useCases.hostedKyc(session) : null;
    void reply.headers(hostedPageHeaders({ nonce, scripts: [] }));
    if (!view) void reply.status(404);
    return renderKycPage(view, nonce);
  }

  /** The customer completed the step: reviewed by the KYC provider, then the page shows where they stand (303). */
  @Post(':session')
  @HttpCode(303)
  async submit(
    @Param('session') session: string,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<string> {
    if (KYC_SESSION_ID.test(session)) await this.useCases.submitKyc(session);
    void reply
      .header('location', encodeURIComponent(session))
      .header('cache-control', 'no-store')
      .header('content-type', 'text/plain; charset=utf-8');
    return 'See Other';
  }
}
