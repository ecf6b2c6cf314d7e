import { palette } from './colors';
import { businessNameInText, escapeHtml as e, jsonForScript } from './html';
import { PAY_SCRIPT } from './pay-script';
import { hostedPage } from './shell';

/**
 * The hosted payment page `{hosted_url}/pay/:checkout_id`, rendered on the server from the public status read
 * (the payments scope's `HostedPaymentStatus`, docs/openapi.yaml): nothing else about the payment or the merchant
 * reaches it.
 */
export type HostedPaymentStatusName =
  | 'pending'
  | 'confirming'
  | 'paid'
  | 'expired'
  | 'cancelled'
  | 'failed'
  | 'refunded'
  | 'recoverable'
  | 'flagged'
  | 'unavailable';

export interface HostedPaymentAsset {
  /** CAIP-19 `eip155:<id>/erc20:<address>`. */
  readonly asset: string;
  readonly chain: string;
  readonly token_symbol: string;
  /** Smallest units the order requires in this token. */
  readonly token_amount: string;
  readonly token_amount_decimal: string;
}

export interface HostedPaymentView {
  readonly checkout_id: string;
  readonly status: HostedPaymentStatusName;
  /** The order value, canonical 6-decimal integer string. */
  readonly amount: string;
  readonly currency: string;
  /** Smallest units of the detected token received so far. */
  readonly amount_paid: string;
  readonly accepted_assets: readonly HostedPaymentAsset[];
  /** Null when the payment must not be paid here (status `unavailable`). */
  readonly deposit_address: string | null;
  readonly detected_asset: string | null;
  readonly detected_chain: string | null;
  readonly expires_at: string;
  readonly success_url: string | null;
  readonly cancel_url: string | null;
  readonly business_name: string;
  readonly background_color: string | null;
  readonly primary_color: string | null;
}

export interface PayPageOptions {
  readonly nonce: string;
  /** CAIP-2 -> display name (`Base`); unknown chains show their id. */
  readonly chainNames: Readonly<Record<string, string>>;
  /** The deposit address as an SVG QR code (qrSvg), rendered on the server. */
  readonly qrSvg: string;
  /** How often the page asks for the status while it is open. */
  readonly pollMs?: number;
}

/** Statuses the page keeps polling in; every other one is a final state page. */
export const LIVE_PAYMENT_STATUSES: readonly HostedPaymentStatusName[] = ['pending', 'confirming'];

/**
 * The deposit address the page offers (with its QR code, picker and wallet button), or null when it renders a state
 * page: a final status, or no address to offer (a payment that cannot be paid here never gets the paying page).
 */
export function depositToOffer(view: HostedPaymentView): string | null {
  return LIVE_PAYMENT_STATUSES.includes(view.status) ? view.deposit_address : null;
}

/** `25000000` (6 decimals) -> `25.00`; more decimals only when the order has them. */
export function formatOrderAmount(amount: string, currency: string): string {
  const padded = amount.padStart(7, '0');
  const whole = padded
    .slice(0, -6)
    .replace(/^0+(?=\d)/, '')
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const fraction = padded.slice(-6).replace(/0+$/, '').padEnd(2, '0');
  return `${whole}.${fraction} ${currency}`;
}

const STATUS_COPY: Record<HostedPaymentStatusName, { title: string; message: string }> = {
  pending: { title: 'Waiting for your payment', message: 'Send the exact amount to the address below.' },
  confirming: {
    title: 'Payment received, confirming',
    message: 'Your transfer arrived. It is being confirmed on chain; you can keep this page open.',
  },
  paid: { title: 'Payment complete', message: 'Thank you: your payment was received and confirmed.' },
  expired: {
    title: 'This payment link has expired',
    message:
      'Do not send funds to this address any more. Anything that arrives late is returned to its sender.',
  },
  cancelled: { title: 'Payment cancelled', message: 'This payment was cancelled. Do not send funds to it.' },
  failed: {
    title: 'Payment failed',
    message: 'This payment could not be completed. Contact the business if you sent funds.',
  },
  refunded: { title: 'Payment refunded', message: 'This payment was refunded to the wallet that paid it.' },
  recoverable: {
    title: 'Payment needs attention',
    message:
      'More than the order amount, or funds after expiry, arrived; the surplus is returned to its sender.',
  },
  flagged: { title: 'Payment under review', message: 'This payment is on hold. Contact the business.' },
  unavailable: {
    title: 'This payment cannot be paid here',
    message:
      'This payment link cannot be paid on this service. Do not send funds to it; if you already did, contact the business.',
  },
};

export function renderPayPage(view: HostedPaymentView, options: PayPageOptions): string {
  const colors = palette(view.background_color, view.primary_color);
  const deposit = depositToOffer(view);
  const live = deposit !== null;
  const total = formatOrderAmount(view.amount, view.currency);
  const body = live ? pendingBody(view, deposit, options, total) : stateBody(view, total);
  return hostedPage({
    title: live ? `Pay ${businessNameInText(view.business_name)}` : STATUS_COPY[view.status].title,
    businessName: view.business_name,
    colors,
    nonce: options.nonce,
    styles: PAY_STYLES,
    body,
    status: view.status,
    ...(live
      ? {
          data: {
            'pay-data': jsonForScript({
              checkout_id: view.checkout_id,
              status: view.status,
              deposit_address: deposit,
              amount_paid: view.amount_paid,
              detected_asset: view.detected_asset,
              assets: view.accepted_assets,
              chain_names: options.chainNames,
              status_copy: STATUS_COPY,
              poll_ms: options.pollMs ?? 3000,
            }),
          },
          scripts: [PAY_SCRIPT],
        }
      : {}),
  });
}

/** The script sources a rendered pay page carries (for hostedPageHeaders). */
export function payPageScripts(view: HostedPaymentView): readonly string[] {
  return depositToOffer(view) !== null ? [PAY_SCRIPT] : [];
}

export function renderPayNotFoundPage(nonce: string): string {
  return hostedPage({
    title: 'Payment link not found',
    businessName: '',
    colors: palette(null, null),
    nonce,
    status: 'not_found',
    body: `<h1>Payment link not found</h1><p class="muted">This payment link is not valid. Ask the business for a new one.</p>`,
  });
}

function pendingBody(
  view: HostedPaymentView,
  deposit: string,
  options: PayPageOptions,
  total: string,
): string {
  const first = view.accepted_assets[0];
  const chainName = (caip2: string) => options.chainNames[caip2] ?? caip2;
  const chains = [...new Set(view.accepted_assets.map((a) => a.chain))];
  const firstTokens = first ? view.accepted_assets.filter((a) => a.chain === first.chain) : [];
  const copy = STATUS_COPY[view.status];
  const picker = first
    ? `<div class="picker">
    <label for="chain">Network</label>
    <select id="chain" data-testid="chain-select">${chains
      .map(
        (c) => `<option value="${e(c)}"${c === first.chain ? ' selected' : ''}>${e(chainName(c))}</option>`,
      )
      .join('')}</select>
    <label for="token">Pay with</label>
    <select id="token" data-testid="token-select">${firstTokens
      .map(
        (a) =>
          `<option value="${e(a.asset)}"${a.asset === first.asset ? ' selected' : ''}>${e(a.token_symbol)}</option>`,
      )
      .join('')}</select>
  </div>
  <p class="send">Send exactly <strong data-testid="send-amount">${e(`${first.token_amount_decimal} ${first.token_symbol}`)}</strong> on <strong data-testid="send-chain">${e(chainName(first.chain))}</strong> to:</p>`
    : '';
  return `<h1 data-testid="title">Pay ${e(businessNameInText(view.business_name))}</h1>
<p class="amount" data-testid="order-amount">${e(total)}</p>
<div class="status status-${e(view.status)}" data-testid="payment-status" data-status="${e(view.status)}" aria-live="polite">
  <strong data-testid="status-title">${e(copy.title)}</strong>
  <p class="muted small" data-testid="status-message">${e(copy.message)}</p>
</div>
${picker}
<div class="deposit">
  <div class="qr" data-testid="qr" role="img" aria-label="QR code of the deposit address">${options.qrSvg}</div>
  <p class="mono" data-testid="deposit-address">${e(deposit)}</p>
  <p class="muted small">The same address on every network listed. Send only the tokens listed, on those networks.</p>
</div>
<button type="button" id="wallet-pay" class="button" data-testid="wallet-pay" hidden>Pay with a browser wallet</button>
<p class="muted small" id="wallet-note" data-testid="wallet-note" hidden></p>
<p class="muted small">This link expires at <time data-testid="expires-at" datetime="${e(view.expires_at)}">${e(view.expires_at.replace('T', ' ').replace(/\.\d+Z$/, ' UTC'))}</time>.</p>`;
}

function stateBody(view: HostedPaymentView, total: string): string {
  const copy = STATUS_COPY[view.status];
  const link = view.status === 'paid' ? view.success_url : view.cancel_url;
  return `<div class="state" data-testid="state" data-status="${e(view.status)}">
  <h1 data-testid="title">${e(copy.title)}</h1>
  <p class="amount" data-testid="order-amount">${e(total)}</p>
  <p class="muted">${e(copy.message)}</p>
  ${link ? `<a class="button" data-testid="return-link" href="${e(link)}">Return to ${e(businessNameInText(view.business_name))}</a>` : ''}
</div>`;
}

const PAY_STYLES = `
.picker{display:grid;grid-template-columns:1fr 1fr;gap:6px 12px;margin:8px 0 12px}
.picker label{font-size:.8rem;font-weight:600;text-transform:uppercase;letter-spacing:.04em;opacity:.8;grid-row:1}
.picker select{font:inherit;padding:9px;border-radius:8px;border:1px solid rgba(0,0,0,.25);background:#FFFFFF;color:#111827;grid-row:2}
.status{border-radius:10px;padding:10px 14px;margin:0 0 16px;background:rgba(0,0,0,.05)}
.status-confirming{background:#FFF6DB;color:#5B4100}
.deposit{text-align:center;margin:8px 0 18px}
.qr svg{width:208px;height:208px;background:#FFFFFF;border-radius:8px;padding:6px}
.send{margin:6px 0}
`;
