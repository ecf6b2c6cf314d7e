import { DomainError, nestedParam, validationError } from '@stablepay/util';

/** Deeper than any request body of the API (metadata is flat); a bound keeps validators off deep recursion. */
export const MAX_JSON_DEPTH = 32;

const invalidJson = (message: string): DomainError =>
  new DomainError({ type: 'invalid_request', status: 400, code: 'invalid_json', message });

// validation_error, as every other refusal of one parameter's value: a NUL and a line separator in the same field
// were answered with two types before (invalid_request here, validation_error by the field's own rule).
const invalidString = (param: string, message: string): DomainError =>
  validationError(param, message, 'invalid_string');

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

const JSON_WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * What a scan of the JSON text finds before it is parsed: nesting past `limit` (bounds the parse and every walk
 * after it), or a key written twice in one object. JSON.parse keeps the last of two equal keys without a word, so
 * `{"amount":"5000000","amount":"1"}` made a 1-unit checkout while a proxy, a log or a signing layer reading the
 * first saw 5000000: a body with two meanings is refused, not guessed. Scans outside strings only; a key is
 * compared decoded (`"am\u006funt"` is `amount`). Stops at the first finding.
 */
function scanStructure(
  text: string,
  limit: number,
): { readonly tooDeep: true } | { readonly duplicateKey: string; readonly topLevel: boolean } | null {
  // One entry per open container: the keys seen so far for an object, null for an array.
  const open: Array<Set<string> | null> = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const start = i;
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
      const keys = open[open.length - 1];
      if (!keys) continue;
      let j = i + 1;
      while (JSON_WHITESPACE.has(text.charCodeAt(j))) j++;
      if (text.charCodeAt(j) !== 0x3a) continue;
      const literal = text.slice(start, i + 1);
      let key = literal.slice(1, -1);
      if (key.includes('\\'))
        try {
          key = JSON.parse(literal) as string;
        } catch {
          return null; // not JSON: JSON.parse says so
        }
      if (keys.has(key)) return { duplicateKey: key, topLevel: open.length === 1 };
      keys.add(key);
    } else if (c === 0x7b || c === 0x5b) {
      if (open.length >= limit) return { tooDeep: true };
      open.push(c === 0x7b ? new Set<string>() : null);
    } else if (c === 0x7d || c === 0x5d) open.pop();
  }
  return null;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A NUL (PostgreSQL text and jsonb cannot hold it) or an unpaired UTF-16 surrogate (not a Unicode string). */
function badCharacter(value: string): string | null {
  if (value.includes('\u0000')) return 'a NUL character';
  if (LONE_SURROGATE.test(value)) return 'an unpaired UTF-16 surrogate';
  return null;
}

/** Walks the parsed body without recursion, refusing bad strings (values and keys) and prototype keys. */
function checkStrings(root: unknown): void {
  const stack: Array<{ value: unknown; path: string }> = [{ value: root, path: '' }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as { value: unknown; path: string };
    if (typeof value === 'string') {
      const bad = badCharacter(value);
      if (bad) throw invalidString(path || 'body', `${path || 'The body'} contains ${bad}.`);
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: path ? nestedParam(path, i) : String(i) }));
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, v] of Object.entries(value)) {
        const bad = badCharacter(key);
        if (bad) throw invalidString(path || 'body', `A key in ${path || 'the body'} contains ${bad}.`);
        if (key === '__proto__' || key === 'constructor' || key === 'prototype')
          throw invalidJson(`The key "${key}" is not allowed in a request body.`);
        stack.push({ value: v, path: path ? nestedParam(path, key) : key });
      }
    }
  }
}

/**
 * Parses a JSON request body strictly: valid UTF-8 only (no silent U+FFFD), bounded nesting, a JSON object at
 * the top, and strings that the database and every later step can hold. Failures are 400s in the envelope,
 * before any handler runs. An empty body is no body (undefined).
 */
export function parseJsonBody(body: Buffer): unknown {
  // No bytes is no body, as it is without a Content-Type: clients that always send `Content-Type:
  // application/json` (fetch and axios wrappers) post nothing to the routes that take no parameters. Each route
  // answers it as it answers no body: accepted where nothing is required, refused where a parameter is.
  if (body.length === 0) return undefined;
  let text: string;
  try {
    text = decoder.decode(body);
  } catch {
    throw invalidJson('The request body is not valid UTF-8.');
  }
  if (text.trim() === '')
    throw invalidJson('The request body is only white space: send a JSON object, or no body at all.');
  const found = scanStructure(text, MAX_JSON_DEPTH);
  if (found && 'tooDeep' in found)
    throw invalidJson(`The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`);
  if (found)
    throw new DomainError({
      type: 'invalid_request',
      status: 400,
      code: 'invalid_json',
      ...(found.topLevel ? { param: found.duplicateKey } : {}),
      message: `The key "${found.duplicateKey}" appears twice in one object of the request body: send each parameter once.`,
    });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalidJson('The request body is not valid JSON.');
  }
  // Every body of the API is an object of named parameters. A bare `null` read as "no parameters" by the
  // routes that take none, so `null` rotated the webhook secret; an array or a scalar names nothing either.
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw invalidJson(`The request body must be a JSON object, not ${describe(parsed)}.`);
  checkStrings(parsed);
  return parsed;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}
