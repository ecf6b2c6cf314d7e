import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { DomainError, invalidRequest } from '@stablepay/util';
import { countNodeHttpAnswer } from './http-metrics';

/**
 * How many times a header was sent. Node keeps only the first of some headers (Host, Authorization) and joins the
 * others (`a, b`), so the parsed headers cannot tell one header from two; `rawHeaders` lists every one as sent.
 */
export function headerCount(rawHeaders: readonly string[], name: string): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]?.toLowerCase() === name) count++;
  return count;
}

/**
 * RFC 9112 section 3.2: an HTTP/1.1 request without Host, or any request with more than one, is 400. Node's own
 * check (`requireHostHeader`) answers a bare 400 with no envelope and no security headers before Fastify sees the
 * request, and it lets two Host headers through (the first wins, so a proxy that read the second routed another
 * request than the one served). Node's check is turned off (createHttpApp) and this hook, the first after the
 * closing answer, refuses both in the envelope. The connection is closed: a request a proxy may have framed or
 * routed differently says nothing good about the bytes that follow it.
 */
export function installHostCheck(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (request, reply, done) => {
    const raw = request.raw;
    const hosts = headerCount(raw.rawHeaders, 'host');
    const http11 = raw.httpVersionMajor > 1 || (raw.httpVersionMajor === 1 && raw.httpVersionMinor >= 1);
    if (hosts === 1 || (hosts === 0 && !http11)) return done();
    void reply.header('connection', 'close');
    done(
      invalidRequest(
        hosts === 0
          ? 'An HTTP/1.1 request must carry a Host header; nothing was done.'
          : 'The request has more than one Host header; nothing was done. Send one.',
        'malformed_request',
        'Host',
      ),
    );
  });
}

const EXPECTATION_FAILED_BODY = JSON.stringify({
  error: {
    type: 'invalid_request',
    code: 'expectation_failed',
    param: 'Expect',
    message: 'The only Expect this server understands is 100-continue; nothing was done.',
  },
});

/**
 * An `Expect` other than 100-continue: Node answers 417 itself, bare, unless the server listens to
 * `checkExpectation`; the request never reaches Fastify, so the answer is written here, in the envelope and with
 * the API's headers. Nothing ran. The connection closes: the client may be sending the body it meant to hold back.
 */
export function installExpectationAnswer(server: Server): void {
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    countNodeHttpAnswer(417, request.method);
    response.writeHead(417, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(EXPECTATION_FAILED_BODY),
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      connection: 'close',
    });
    response.end(EXPECTATION_FAILED_BODY);
  });
}

const unsupportedContentEncoding = (): DomainError =>
  new DomainError({
    type: 'invalid_request',
    status: 415,
    code: 'unsupported_content_encoding',
    param: 'Content-Encoding',
    message: 'Send the request body unencoded (no Content-Encoding, or identity); nothing was done.',
  });

/**
 * The server decodes no Content-Encoding: a compressed body read as plain bytes was either applied as if it were
 * the JSON the client compressed (`br` on a plain body) or refused with a misleading "not valid UTF-8" (a real gzip
 * body). Any coding but identity is 415 before the body is read (preParsing runs after the rate limits and before
 * any parser), whatever the method and media type. Repeated headers arrive joined with commas.
 */
export function installContentEncodingCheck(fastify: FastifyInstance): void {
  fastify.addHook('preParsing', (request, _reply, payload, done) => {
    const encoding = request.headers['content-encoding'];
    if (encoding === undefined) return done(null, payload);
    const codings = encoding
      .split(',')
      .map((c) => c.trim().toLowerCase())
      .filter((c) => c !== '');
    if (codings.every((c) => c === 'identity')) return done(null, payload);
    done(unsupportedContentEncoding(), payload);
  });
}

/** `charset` parameters of a media type: a token or a quoted string (RFC 9110 section 5.6.6), any case. */
const CHARSET_PARAM = /;\s*charset\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]*)/gi;
/** UTF-8's name and the alias the WHATWG Encoding standard (and so every browser) accepts for it. */
const UTF8_NAMES = new Set(['utf-8', 'utf8']);

/**
 * The refusal for a JSON body declared in a charset other than UTF-8 (RFC 8259 allows nothing else), or null. The
 * bytes would be read as UTF-8 anyway: UTF-16 text fails as invalid UTF-8 at best and latin1 text with an accented
 * letter is read as other letters at worst.
 */
export function unsupportedCharset(contentType: string | undefined): DomainError | null {
  if (contentType === undefined) return null;
  for (const match of contentType.matchAll(CHARSET_PARAM)) {
    const raw = match[1] ?? '';
    const name = (raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw).trim().toLowerCase();
    if (!UTF8_NAMES.has(name)) {
      return new DomainError({
        type: 'invalid_request',
        status: 415,
        code: 'unsupported_charset',
        param: 'Content-Type',
        message:
          'Send the request body as UTF-8 (application/json; charset=utf-8, or no charset); nothing was done.',
      });
    }
  }
  return null;
}
