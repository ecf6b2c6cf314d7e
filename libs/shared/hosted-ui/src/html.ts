import { withoutBidiControls } from '@stablepay/util';

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/**
 * Escapes text for HTML content and quoted attribute values (merchant input is untrusted). Bidi embeddings,
 * overrides and isolates are dropped: the API refuses them in what it shows (`requireDisplayText`), and a name
 * stored before that rule must not read as another name on a payer's page.
 */
export function escapeHtml(value: string): string {
  return withoutBidiControls(value).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);
}

/** JSON safe inside a <script type="application/json"> element. */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}
