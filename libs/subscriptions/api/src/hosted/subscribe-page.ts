import type { SubscriptionCheckoutObject, SubscriptionOption } from '@stablepay/subscriptions-domain';
import type { HostedSubscribeView } from '../subscription-checkouts.port';
import {
  businessNameInText,
  escapeHtml as e,
  hostedPage,
  jsonForScript,
  palette,
  type Palette,
  visibleText,
} from '@stablepay/hosted-ui';
import { formatFiat, formatPeriod, formatRate, formatToken } from './format';
import { SUBSCRIBE_SCRIPT } from './subscribe-script';

/**
 * The hosted subscribe page (SPEC Rules 6-7, States > Subscription checkout), rendered on the server.
 *
 * Pending: the business name, plan_name / plan_description from metadata (escaped: merchant input), the recurring
 * amount and period, a chain and token picker built from subscription_options showing the converted token amount
 * and the rate of the selected option, and a dismiss action (cancels the intent). Completed, cancelled, expired:
 * a state page with the way back to the merchant.
 *
 * Wallet step (subscribe-script.ts): with any EIP-1193 wallet the customer connects, the page asks the service for
 * the subscribe authorization of the chosen option, shows the converted first charge, cap and budget, has the
 * wallet approve the manager and send the one subscribe transaction, then reports its hash. The data it needs
 * (never the opaque metadata) is in `<script type="application/json" id="subscribe-data">`.
 */
export function renderSubscribePage(view: HostedSubscribeView, nonce: string): string {
  const c = view.checkout;
  const colors = palette(view.backgroundColor, view.primaryColor);
  const planName = visibleText(c.metadata['plan_name']);
  const title =
    view.status === 'pending'
      ? `Subscribe to ${planName ?? businessNameInText(c.business_name)}`
      : stateCopy(view.status, c).title;
  const body = view.status === 'pending' ? pendingBody(view) : stateBody(view);
  return layout({
    title,
    businessName: c.business_name,
    colors,
    nonce,
    body,
    status: view.status,
    data: view.status === 'pending' ? pickerData(view) : null,
  });
}

export function renderNotFoundPage(nonce: string): string {
  const colors = palette(null, null);
  return layout({
    title: 'Subscription link not found',
    businessName: '',
    colors,
    nonce,
    status: 'not_found',
    body: `<h1>Subscription link not found</h1><p class="muted">This subscription link is not valid. Ask the business for a new one.</p>`,
    data: null,
  });
}

function withId(url: string | null, id: string): string | null {
  return url === null ? null : url.split('{SUBSCRIPTION_CHECKOUT_ID}').join(encodeURIComponent(id));
}

function stateCopy(
  status: HostedSubscribeView['status'],
  c: SubscriptionCheckoutObject,
): { title: string; message: string; link: string | null } {
  const business = businessNameInText(c.business_name);
  switch (status) {
    case 'completed':
      return {
        title: "You're subscribed",
        message: `Your subscription to ${business} is active.`,
        link: withId(c.success_url ?? c.return_url, c.id),
      };
    case 'cancelled':
      return {
        title: 'Subscription cancelled',
        message: `This subscription request was cancelled. Nothing was charged.`,
        link: withId(c.cancel_url ?? c.return_url, c.id),
      };
    case 'expired':
      return {
        title: 'This subscription link has expired',
        message: `Nothing was charged. Ask ${business} for a new subscription link.`,
        link: withId(c.return_url ?? c.cancel_url, c.id),
      };
    case 'unavailable':
      return {
        title: 'This subscription cannot be set up here',
        message: `This subscription link cannot be used on this service. Nothing was charged. Ask ${business} for a new subscription link.`,
        link: withId(c.return_url ?? c.cancel_url, c.id),
      };
    case 'pending':
      return { title: '', message: '', link: null };
  }
}

function stateBody(view: HostedSubscribeView): string {
  const c = view.checkout;
  const copy = stateCopy(view.status, c);
  return `<div class="state state-${view.status}" data-testid="state" data-status="${view.status}">
  <h1>${e(copy.title)}</h1>
  <p class="muted">${e(copy.message)}</p>
  ${copy.link ? `<a class="button" data-testid="return-link" href="${e(copy.link)}">Return to ${e(businessNameInText(c.business_name))}</a>` : ''}
</div>`;
}

function optionSummary(
  o: SubscriptionOption,
  c: SubscriptionCheckoutObject,
): { amount: string; rate: string; limits: string } {
  return {
    amount: formatToken(o.price_amount, o.token_decimals, o.token_symbol),
    rate: `1 ${o.token_symbol} = ${formatRate(o.rate)} ${o.rate_currency}`,
    limits: `Limits: ${formatToken(o.cap_amount, o.token_decimals, o.token_symbol)} (${formatFiat(c.cap, c.price_currency)}) per charge, ${formatToken(o.budget_amount, o.token_decimals, o.token_symbol)} (${formatFiat(c.budget, c.price_currency)}) per period.`,
  };
}

function pendingBody(view: HostedSubscribeView): string {
  const c = view.checkout;
  // Plan texts stored before the display-text rule may show nothing: left out, as when the merchant sent none.
  const planName = visibleText(c.metadata['plan_name']);
  const planDescription = visibleText(c.metadata['plan_description']);
  const business = businessNameInText(c.business_name);
  const first = view.options[0];
  const chains = [...new Map(view.options.map((o) => [o.chain, o.chain_name])).entries()];
  const firstChainTokens = first ? view.options.filter((o) => o.chain === first.chain) : [];
  const summary = first ? optionSummary(first, c) : null;
  const fiatPriced = c.price_currency !== null;
  const picker =
    first && summary
      ? `<div class="picker">
    <label for="chain">Network</label>
    <select id="chain" name="chain" data-testid="chain-select">${chains
      .map(
        ([caip2, name]) =>
          `<option value="${e(caip2)}"${caip2 === first.chain ? ' selected' : ''}>${e(name)}</option>`,
      )
      .join('')}</select>
    <label for="token">Pay with</label>
    <select id="token" name="token" data-testid="token-select">${firstChainTokens
      .map(
        (o) =>
          `<option value="${e(o.asset)}"${o.asset === first.asset ? ' selected' : ''}>${e(o.token_symbol)}</option>`,
      )
      .join('')}</select>
  </div>
  <div class="quote" data-testid="quote" aria-live="polite">
    <p class="token-amount"><span data-testid="token-amount">${e(summary.amount)}</span> ${e(formatPeriod(c.period_duration))}</p>
    ${fiatPriced ? `<p class="muted" data-testid="rate">${e(summary.rate)}</p>` : ''}
    <p class="muted small" data-testid="limits">${e(summary.limits)}</p>
  </div>
  <div class="confirm" id="confirm" data-testid="confirm" hidden>
    <p class="small">Wallet <span class="mono" data-testid="confirm-wallet"></span></p>
    <p>First charge now: <strong data-testid="confirm-first-charge"></strong></p>
    <p class="small">You allow at most <strong data-testid="confirm-cap"></strong> per charge and <strong data-testid="confirm-budget"></strong> per period. Your wallet approves the subscription contract <span class="mono small" data-testid="confirm-manager"></span>; the contract enforces these limits, and you can cancel at any time.</p>
    <p class="muted small" data-testid="confirm-rate"></p>
  </div>
  <button type="button" id="continue" class="button" data-testid="continue" disabled>Connect wallet</button>
  <button type="button" id="subscribe" class="button" data-testid="subscribe" hidden>Approve and subscribe</button>
  <p class="muted small" id="wallet-note" data-testid="wallet-note" aria-live="polite">To subscribe, open this page in a browser with a crypto wallet.</p>
  <p class="error small" id="wallet-error" data-testid="wallet-error" role="alert" hidden></p>`
      : `<p class="notice" data-testid="no-options">No stablecoin can be priced for this plan right now. Please try again later.</p>`;
  return `<div class="plan">
  ${planName !== null ? `<h1 data-testid="plan-name">${e(planName)}</h1>` : `<h1>Subscribe to ${e(business)}</h1>`}
  ${planDescription !== null ? `<p class="muted" data-testid="plan-description">${e(planDescription)}</p>` : ''}
  <p class="amount"><span data-testid="recurring-amount">${e(formatFiat(c.price, c.price_currency))}</span> <span data-testid="period">${e(formatPeriod(c.period_duration))}</span></p>
</div>
${picker}
<form method="post" action="${e(encodeURIComponent(c.id))}/dismiss" enctype="text/plain" class="dismiss">
  <button type="submit" class="link" data-testid="dismiss">Cancel and return to ${e(business)}</button>
</form>
<p class="muted small">This link expires at <time data-testid="expires-at" datetime="${e(c.expires_at)}">${e(c.expires_at.replace('T', ' ').replace(/\.\d+Z$/, ' UTC'))}</time>.</p>`;
}

function pickerData(view: HostedSubscribeView): string {
  const c = view.checkout;
  // Display strings are computed here (exact bigint formatting) so the script only swaps text.
  const options = view.options.map((o) => ({ ...o, display: optionSummary(o, c) }));
  // What the wallet step needs; merchant metadata other than the rendered plan fields stays off the page.
  const checkout = {
    id: c.id,
    onchain_id: c.onchain_id,
    business_name: c.business_name,
    price: c.price,
    price_currency: c.price_currency,
    period_duration: c.period_duration,
    cap: c.cap,
    budget: c.budget,
    supported_chains: c.supported_chains,
    expires_at: c.expires_at,
  };
  // The page's own origin forwards the subscribe call (connect-src 'self'; the API may live elsewhere).
  return jsonForScript({ checkout, options, subscribe_path: `${encodeURIComponent(c.id)}/subscribe` });
}

const CLIENT_SCRIPT = SUBSCRIBE_SCRIPT;

const SUBSCRIBE_STYLES = (p: Palette): string => `
.amount [data-testid=period]{font-size:1rem;font-weight:500;opacity:.8}
.picker{display:grid;grid-template-columns:1fr 1fr;gap:6px 12px;margin:8px 0 16px}
.picker label{font-size:.8rem;font-weight:600;text-transform:uppercase;letter-spacing:.04em;opacity:.8;grid-row:1}
.picker select{font:inherit;padding:9px;border-radius:8px;border:1px solid rgba(0,0,0,.25);background:#FFFFFF;color:#111827;grid-row:2}
.quote{border:2px solid ${p.accentOnCard};border-radius:10px;padding:12px 14px;margin-bottom:18px}
.token-amount{font-size:1.15rem;font-weight:650;margin:0 0 4px}
.dismiss{margin:14px 0 6px;text-align:center}
.confirm{border:1px solid rgba(0,0,0,.15);border-radius:10px;padding:10px 14px;margin-bottom:14px}
.confirm p{margin:6px 0}
#subscribe{margin-top:0}
`;

function layout(input: {
  title: string;
  businessName: string;
  colors: Palette;
  nonce: string;
  body: string;
  status: string;
  data: string | null;
}): string {
  return hostedPage({
    title: input.title,
    businessName: input.businessName,
    colors: input.colors,
    nonce: input.nonce,
    styles: SUBSCRIBE_STYLES(input.colors),
    body: input.body,
    status: input.status,
    ...(input.data !== null ? { data: { 'subscribe-data': input.data }, scripts: [CLIENT_SCRIPT] } : {}),
  });
}

/** The script sources a rendered subscribe page carries (for hostedPageHeaders). */
export function subscribePageScripts(view: HostedSubscribeView): readonly string[] {
  return view.status === 'pending' ? [CLIENT_SCRIPT] : [];
}
