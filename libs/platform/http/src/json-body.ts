import { DomainError, nestedParam } from '@stablepay/util';

/** Deeper than any request body of the API (metadata is flat); a bound keeps validators off deep recursion. */
export const MAX_JSON_DEPTH = 32;

const invalidJson = (message: string): DomainError =>
  new DomainError({ type: 'invalid_request', status: 400, code: 'invalid_json', message });

const invalidString = (param: string, message: string): DomainError =>
  new DomainError({ type: 'invalid_request', status: 400, code: 'invalid_string', param, message });

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Nesting depth of a JSON text, scanning brackets outside strings; stops as soon as `limit` is passed. */
function exceedsDepth(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
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
  if (exceedsDepth(text, MAX_JSON_DEPTH))
    throw invalidJson(`The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`);
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
