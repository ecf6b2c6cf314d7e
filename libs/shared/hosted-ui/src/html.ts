import { hasVisibleCharacter, withoutBidiControls } from '@stablepay/util';

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

/**
 * `value` when it shows something (`hasVisibleCharacter`), else null. The API refuses merchant text with no visible
 * character (`requireDisplayText`), but events stored before that rule still carry such names and plan texts, and
 * events are not rewritten: the pages fall back to their own words instead of showing a blank.
 */
export function visibleText(value: string | null | undefined): string | null {
  return value !== null && value !== undefined && hasVisibleCharacter(value) ? value : null;
}

/** The business name inside a sentence of a hosted page ("Pay ...", "Return to ..."), "the business" when it shows nothing. */
export function businessNameInText(name: string): string {
  return visibleText(name) ?? 'the business';
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
