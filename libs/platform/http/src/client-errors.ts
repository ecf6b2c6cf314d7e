import type { Socket } from 'node:net';
import { countNodeHttpAnswer } from './http-metrics';

/**
 * What a client gets when Node's HTTP parser or its deadlines end a request before any route ran: a request that
 * took longer than the request timeout (408), headers larger than Node accepts (431), or bytes that are not HTTP
 * (400). Fastify's default writes its own `{"error","message","statusCode"}` body; a client that parses every error
 * as the API's envelope gets the envelope here too. Nothing was run, so nothing changed.
 */
const ANSWERS: Record<string, { status: number; reason: string; code: string; message: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    reason: 'Request Timeout',
    code: 'request_timeout',
    message: 'The request was not received in time; nothing was done. Send it again without pausing.',
  },
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    code: 'headers_too_large',
    message: 'The request headers are too large; nothing was done.',
  },
};

const MALFORMED = {
  status: 400,
  reason: 'Bad Request',
  code: 'malformed_request',
  message: 'The request is not valid HTTP; nothing was done.',
};

function clientErrorAnswer(errorCode: string | undefined): typeof MALFORMED {
  return (errorCode !== undefined ? ANSWERS[errorCode] : undefined) ?? MALFORMED;
}

/** The raw response for a client error, envelope and the API's security headers included. */
export function clientErrorResponse(errorCode: string | undefined): string {
  const a = clientErrorAnswer(errorCode);
  const body = JSON.stringify({ error: { type: 'invalid_request', code: a.code, message: a.message } });
  return (
    `HTTP/1.1 ${a.status} ${a.reason}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Cache-Control: no-store\r\n' +
    'X-Content-Type-Options: nosniff\r\n' +
    'Connection: close\r\n\r\n' +
    body
  );
}

/** Fastify's `clientErrorHandler`: Node's `clientError` with the envelope instead of Fastify's body. */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  // A reset or destroyed socket has nobody left to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // Node's own rule: never write into a response whose headers already went out (it would corrupt that response).
  const pending = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !pending?.headersSent) {
    socket.write(clientErrorResponse(error.code));
    countNodeHttpAnswer(clientErrorAnswer(error.code).status);
  }
  socket.destroy(error);
}
