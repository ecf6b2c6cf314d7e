import type { FastifyRequest } from 'fastify';
import { invalidRequest } from '@stablepay/util';
import { headerCount } from './request-headers';

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

/** Where the interceptor leaves the claimed key's command id on the request (read by `idempotencyKeyOf`). */
export const IDEMPOTENCY_COMMAND_ID = Symbol.for('stablepay.idempotencyCommandId');

/** Where the interceptor leaves the time it claimed the request's key (read by `idempotencyClaimedAtOf`). */
export const IDEMPOTENCY_CLAIMED_AT = Symbol.for('stablepay.idempotencyClaimedAt');

/**
 * When the interceptor claimed the request's Idempotency-Key (its clock), or undefined without a claimed key. A
 * command that must tell whether a later attempt with the same key overtook this one (a claim outlived its lease
 * and was taken over) compares this time, not its own start: this attempt may reach its command long after its
 * claim, and after the attempt that took the claim over.
 */
export function idempotencyClaimedAtOf(request: Pick<FastifyRequest, 'headers'>): Date | undefined {
  return (request as { [IDEMPOTENCY_CLAIMED_AT]?: Date })[IDEMPOTENCY_CLAIMED_AT];
}

/**
 * The command id of a key's generation: the key with the generation after a character no header value can hold
 * (Node reads header bytes as latin1), so it never equals another key; the key itself for generation 1, which only
 * rows claimed before generations were minutes have (their objects keep their ids).
 */
export function idempotencyCommandId(key: string, generation: number): string {
  return generation <= 1 ? key : `${key}\u2192${generation}`;
}

/** Where a handler marks an answer that is not its request's outcome yet (read by the Idempotency-Key interceptor). */
export const IDEMPOTENCY_NOT_FINAL = Symbol.for('stablepay.idempotencyNotFinal');

/**
 * Marks the answer as not the request's outcome yet (a 202 `pending`: asking again later answers the outcome), so
 * its Idempotency-Key does not keep it: a retry with the key runs again instead of replaying "pending" for 24 hours.
 * Only for answers whose request is safe to run again (it records nothing twice).
 */
export function answerIsNotFinal(request: Pick<FastifyRequest, 'headers'>): void {
  (request as { [IDEMPOTENCY_NOT_FINAL]?: boolean })[IDEMPOTENCY_NOT_FINAL] = true;
}

/**
 * The command id of the request's Idempotency-Key (checked by the interceptor, 1-255 characters), or undefined: what
 * creates, charges and payment actions derive their ids from. The key itself, or its generation's id once the key is
 * used again after its 24 hours (`idempotencyCommandId`), which the interceptor leaves on the request.
 */
export function idempotencyKeyOf(request: Pick<FastifyRequest, 'headers'>): string | undefined {
  const claimed = (request as { [IDEMPOTENCY_COMMAND_ID]?: string })[IDEMPOTENCY_COMMAND_ID];
  if (claimed !== undefined) return claimed;
  const raw = request.headers['idempotency-key'];
  const key = Array.isArray(raw) ? raw[0] : raw;
  return key || undefined;
}

/**
 * The request's Idempotency-Key as sent, or undefined without one; a key that is empty, longer than 255 characters
 * or sent in more than one header is 400 `invalid_idempotency_key` before anything runs. The interceptor claims a
 * POST's key with it; a route outside the interceptor that takes the key as its command id (the subscription
 * checkout cancel, a PATCH) checks it here too, so a malformed key never names a command.
 */
export function checkedIdempotencyKey(request: Pick<FastifyRequest, 'headers' | 'raw'>): string | undefined {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  // Node joins a repeated Idempotency-Key into one value ("a, b"): a retry that sent one of them would then
  // run again under another key. Which key was meant is unknowable, so two are refused before any claim.
  if (headerCount(request.raw.rawHeaders, 'idempotency-key') > 1) {
    throw invalidRequest(
      'The request has more than one Idempotency-Key header; nothing was done. Send one key, once.',
      'invalid_idempotency_key',
      'Idempotency-Key',
    );
  }
  const key = Array.isArray(raw) ? (raw[0] ?? '') : raw;
  if (key.length === 0 || key.length > 255) {
    throw invalidRequest(
      'Idempotency-Key must be between 1 and 255 characters.',
      'invalid_idempotency_key',
      'Idempotency-Key',
    );
  }
  return key;
}
