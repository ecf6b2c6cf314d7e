import { createHash } from 'node:crypto';
import type { Palette } from './colors';
import { escapeHtml as e, visibleText } from './html';

/**
 * The frame every hosted page shares (subscribe, pay, cancel): header bar with the business name, one card, the
 * branding palette, and the security headers.
 *
 * Scripts are fixed sources inlined and allowed by their SHA-256 in the CSP (no nonce to leak into a cached copy,
 * nothing inline runs unless it is byte-for-byte one of them, no eval); per-page data travels in
 * `<script type="application/json">` islands, which never execute. The stylesheet depends on the merchant's
 * colors, so it carries a per-response nonce.
 */
export function scriptHash(source: string): string {
  return `'sha256-${createHash('sha256').update(source, 'utf8').digest('base64')}'`;
}

/** The headers of every hosted page: no caching, no framing, no referrer (the URL is a capability), strict CSP. */
export function hostedPageHeaders(input: {
  nonce: string;
  scripts: readonly string[];
}): Record<string, string> {
  const scriptSrc = input.scripts.length > 0 ? input.scripts.map(scriptHash).join(' ') : "'none'";
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'content-security-policy': [
      "default-src 'none'",
      `style-src 'nonce-${input.nonce}'`,
      `script-src ${scriptSrc}`,
      // Status polling and the subscribe call go to the page's own origin; wallets talk through window.ethereum.
      "connect-src 'self'",
      'img-src data:',
      "form-action 'self'",
      "base-uri 'none'",
      "frame-ancestors 'none'",
    ].join('; '),
  };
}

export const BASE_STYLES = (p: Palette): string => `
*{box-sizing:border-box}
html,body{margin:0}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;background:${p.pageBackground};color:${p.pageText};line-height:1.45}
header.bar{background:${p.headerBackground};color:${p.headerText};padding:14px 24px;font-weight:600;border-bottom:1px solid rgba(0,0,0,.08)}
main{max-width:460px;margin:32px auto;padding:0 16px}
.card{background:${p.cardBackground};color:${p.cardText};border-radius:14px;padding:28px;box-shadow:0 2px 12px rgba(0,0,0,.08)}
h1{font-size:1.35rem;margin:0 0 8px}
.amount{font-size:1.6rem;font-weight:700;margin:16px 0 20px}
.muted{opacity:.78;margin:6px 0}
.small{font-size:.85rem}
.button{display:inline-block;width:100%;text-align:center;font:inherit;font-weight:600;padding:12px 16px;border:0;border-radius:10px;background:${p.primary};color:${p.primaryText};text-decoration:none;cursor:pointer}
.button[disabled]{opacity:.55;cursor:not-allowed}
.link{background:none;border:0;padding:0;font:inherit;color:${p.accentOnCard};text-decoration:underline;cursor:pointer}
.notice{padding:12px;border-radius:8px;background:rgba(0,0,0,.06)}
.error{padding:12px;border-radius:8px;background:#FDECEC;color:#7A1111}
.state{text-align:center}
.state .button{margin-top:16px}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
[hidden]{display:none !important}
`;

export interface HostedPageInput {
  readonly title: string;
  readonly businessName: string;
  readonly colors: Palette;
  readonly nonce: string;
  /** Page-specific CSS, after the shared rules. */
  readonly styles?: string;
  readonly body: string;
  readonly status: string;
  /** JSON islands (already made safe with jsonForScript), by element id. */
  readonly data?: Readonly<Record<string, string>>;
  /** Fixed script sources; each must also be passed to hostedPageHeaders. */
  readonly scripts?: readonly string[];
}

export function hostedPage(input: HostedPageInput): string {
  const islands = Object.entries(input.data ?? {})
    .map(([id, json]) => `<script type="application/json" id="${e(id)}">${json}</script>`)
    .join('\n');
  const scripts = (input.scripts ?? []).map((s) => `<script>${s}</script>`).join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<meta name="referrer" content="no-referrer">
<title>${e(input.title)}</title>
<style nonce="${e(input.nonce)}">${BASE_STYLES(input.colors)}${input.styles ?? ''}</style>
</head>
<body data-status="${e(input.status)}">
<header class="bar" data-testid="business-name">${e(visibleText(input.businessName) ?? 'Stablepay')}</header>
<main><div class="card">
${input.body}
</div></main>
${islands}
${scripts}
</body>
</html>
`;
}
