import type { FastifyRequest } from 'fastify';

/**
 * The gateway's own address, from the socket the request arrived on (`{hosted_url}` defaults to `<origin>/hosted`
 * when HOSTED_URL is unset). Never the Host header: checkout_url is a link the merchant hands its customer, and a
 * caller must not choose where it points. Behind a proxy or TLS terminator, HOSTED_URL names the public address.
 */
export function requestOrigin(request: Pick<FastifyRequest, 'socket'>): string {
  const raw = request.socket.localAddress ?? '127.0.0.1';
  const address = raw.startsWith('::ffff:') ? raw.slice(7) : raw;
  const host = address.includes(':') ? `[${address}]` : address;
  return `http://${host}:${request.socket.localPort ?? 80}`;
}

/** The request's Idempotency-Key (checked by the interceptor, 1-255 characters), or undefined. */
export function idempotencyKeyOf(request: Pick<FastifyRequest, 'headers'>): string | undefined {
  const raw = request.headers['idempotency-key'];
  const key = Array.isArray(raw) ? raw[0] : raw;
  return key || undefined;
}
