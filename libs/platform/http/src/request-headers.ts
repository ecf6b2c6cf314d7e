import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { invalidRequest } from '@stablepay/util';

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
  server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
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
