import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '@stablepay/util';

/** A percent-encoded character of the URL that no parameter may hold. */
export interface UrlFault {
  /** Index of its `%` in the raw URL. */
  readonly at: number;
  /** Length of its escapes in the raw URL (3, or up to 9 for a surrogate's three bytes). */
  readonly length: number;
  readonly what: string;
  /** `invalid_string` for a character no parameter may hold, `invalid_url` for escapes that decode to nothing. */
  readonly code: 'invalid_string' | 'invalid_url';
}

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x57 : -1;
}

/** The byte a `%XX` escape at `i` stands for, or -1. */
function escapedByte(url: string, i: number): number {
  if (url.charCodeAt(i) !== 0x25) return -1;
  const hi = hexDigit(url.charCodeAt(i + 1));
  const lo = hexDigit(url.charCodeAt(i + 2));
  return hi < 0 || lo < 0 ? -1 : (hi << 4) | lo;
}

/**
 * The first NUL, other C0 control or DEL, or UTF-16 surrogate (UTF-8 `ED A0..BF`) the URL encodes, or null. One
 * pass over the escapes of the raw URL: a URL without `%` costs one indexOf. (The HTTP parser already refuses such
 * characters sent raw.) PostgreSQL text cannot hold a NUL, and none of these belongs in an id, a cursor or a filter.
 */
export function findUrlFault(url: string): UrlFault | null {
  for (let i = url.indexOf('%'); i !== -1; i = url.indexOf('%', i + 1)) {
    const b = escapedByte(url, i);
    if (b < 0) continue;
    if (b < 0x20 || b === 0x7f)
      return {
        at: i,
        length: 3,
        what: b === 0 ? 'a NUL character' : 'a control character',
        code: 'invalid_string',
      };
    if (b === 0xed) {
      const next = escapedByte(url, i + 3);
      if (next >= 0xa0 && next <= 0xbf) {
        const last = escapedByte(url, i + 6);
        const length = last >= 0x80 && last <= 0xbf ? 9 : 6;
        return { at: i, length, what: 'an unpaired UTF-16 surrogate', code: 'invalid_string' };
      }
    }
  }
  return findUndecodableQueryParam(url);
}

/**
 * The first query parameter (name=value, as `&` splits them) whose escapes are malformed (`%ZZ`, a lone `%`) or
 * decode to bytes that are not UTF-8 (`%E0%A4`), or null. The router refuses such a path; Fastify's query parser
 * keeps such a value as its raw text, so a handler would see `%ZZ` as if the client had meant it.
 */
function findUndecodableQueryParam(url: string): UrlFault | null {
  const query = url.indexOf('?');
  if (query === -1 || url.indexOf('%', query) === -1) return null;
  for (let start = query + 1; start <= url.length;) {
    let end = url.indexOf('&', start);
    if (end === -1) end = url.length;
    const pair = url.slice(start, end);
    if (pair.includes('%')) {
      try {
        decodeURIComponent(pair);
      } catch {
        return {
          at: start,
          length: end - start,
          what: 'percent-encoding that does not decode as UTF-8 (a % and two hex digits per byte)',
          code: 'invalid_url',
        };
      }
    }
    start = end + 1;
  }
  return null;
}

/** The query parameter whose name or value holds `at` (the name, decoded as far as it decodes). */
function queryParamAt(url: string, query: number, at: number): string {
  const start = Math.max(url.lastIndexOf('&', at), query) + 1;
  let end = url.indexOf('&', start);
  if (end === -1) end = url.length;
  const eq = url.indexOf('=', start);
  const raw = url.slice(start, eq !== -1 && eq < end ? eq : end);
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' ')) || 'query';
  } catch {
    return raw;
  }
}

/** The route parameter (`:name` in the route's pattern) of the path segment holding `at`, else "path". */
function pathParamAt(url: string, at: number, route: string | undefined): string {
  if (!route) return 'path';
  let segment = 0;
  for (let i = url.indexOf('/'); i !== -1 && i < at; i = url.indexOf('/', i + 1)) segment++;
  const pattern = route.split('/')[segment];
  return pattern?.startsWith(':') ? (/^:([A-Za-z0-9_]+)/.exec(pattern)?.[1] ?? 'path') : 'path';
}

const URL_FAULT = Symbol('stablepay.urlFault');
type FaultedMessage = IncomingMessage & { [URL_FAULT]?: { fault: UrlFault; url: string } };

// A character a parameter may not hold is that parameter's validation_error, as in a body (json-body's
// invalid_string); escapes that decode to nothing leave the URL itself unreadable: invalid_request.
const invalidUrl = (code: UrlFault['code'], message: string, param?: string): DomainError =>
  new DomainError({
    type: code === 'invalid_string' ? 'validation_error' : 'invalid_request',
    status: 400,
    code,
    message,
    ...(param ? { param } : {}),
  });

/**
 * Refuses, on every route and before any handler, a path or query parameter holding a NUL, a control character
 * or half of a surrogate pair: 400 `invalid_string` naming the parameter, as the body check does for strings.
 *
 * The raw URL is scanned before routing (Fastify's `rewriteUrl`): the router cannot decode a surrogate in the
 * path at all, so a faulty URL is routed with the character replaced (to find which route parameter held it) and
 * refused in the first onRequest hook. Other undecodable paths (invalid UTF-8) get 400 `invalid_url` in the
 * envelope instead of Fastify's own body.
 */
export const urlStringsOptions = {
  // Fastify's default (100) answered a longer path parameter with a framework 414 naming no parameter, before the
  // route: longer than Node lets a request line be (its 16 KiB header limit), so every parameter reaches its route,
  // which answers an id it does not know with 404 and a malformed one with 400 naming it.
  maxParamLength: 16 * 1024,
  rewriteUrl(req: IncomingMessage): string {
    const url = req.url ?? '/';
    const fault = findUrlFault(url);
    if (!fault) return url;
    (req as FaultedMessage)[URL_FAULT] = { fault, url };
    let routable = url;
    for (let f: UrlFault | null = fault; f; f = findUrlFault(routable))
      routable = `${routable.slice(0, f.at)}_${routable.slice(f.at + f.length)}`;
    return routable;
  },
  frameworkErrors(error: Error & { code?: string }, _request: FastifyRequest, reply: FastifyReply): void {
    const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH';
    void reply
      .status(tooLong ? 414 : 400)
      .header('content-type', 'application/json; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .send({
        error: {
          type: 'invalid_request',
          code: tooLong ? 'url_too_long' : 'invalid_url',
          message: tooLong
            ? 'A path parameter is too long.'
            : 'The request URL is not valid: a path segment does not decode as UTF-8.',
        },
      });
  },
};

export function installUrlStringCheck(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (request, _reply, done) => {
    const faulted = (request.raw as FaultedMessage)[URL_FAULT];
    if (faulted === undefined) return done();
    const { fault, url } = faulted;
    const query = url.indexOf('?');
    const param =
      query !== -1 && fault.at > query
        ? queryParamAt(url, query, fault.at)
        : pathParamAt(url, fault.at, request.routeOptions.url);
    done(invalidUrl(fault.code, `The parameter ${param} contains ${fault.what}.`, param));
  });
}
