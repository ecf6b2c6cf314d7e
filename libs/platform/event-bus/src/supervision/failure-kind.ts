/**
 * How a failed handler call is classified before anything is parked (projection runner and supervised consumers).
 *
 * - Connection loss (SQLSTATE class 08, 57P01-57P03 shutdown / cannot connect now, Node socket errors, pg's
 *   "Connection terminated"): the server or the socket is gone. Never one event's fault, never parked.
 * - Transient (connection loss, plus classes 40 serialization / deadlock, 53 resources, 58 system, XX internal,
 *   55P03 lock not available, 57014 statement timeout or cancel, a timeout message, or an error that declares
 *   itself `retryable`): retried first. A class-57 timeout is NOT blindly transient: a delivery that keeps failing
 *   transiently gets one isolate pass after a few failures in a row, and an event whose own application still
 *   times out while the connection answers is parked (an event that always times out would otherwise hold every
 *   merchant behind it).
 * - Dependency outage (a chain node, a gRPC or HTTP service, a socket to anything: ethers SERVER_ERROR /
 *   NETWORK_ERROR / TIMEOUT, gRPC UNAVAILABLE / DEADLINE_EXCEEDED, ECONNREFUSED and the other socket errors, also
 *   as the `cause` or wrapped `error` of another error): like a lost database connection, retried with back-off
 *   and never parked, since parking would hold the message until an automatic retry up to 30 min after the
 *   dependency is back; a group that keeps failing on it shows as stalled in /ready and the gauges instead.
 * - Anything else: the event's own (a constraint, a bug in the handler), isolated at once.
 */
function codeOf(error: unknown): string | undefined {
  const e = error as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = typeof e?.code === 'string' ? e.code : e?.driverError?.code;
  return typeof code === 'string' ? code : undefined;
}

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : '';
}

export function isConnectionLoss(error: unknown): boolean {
  const code = codeOf(error);
  if (code !== undefined && (/^08/.test(code) || /^57P0[123]$/.test(code) || /^E[A-Z]+$/.test(code)))
    return true;
  return /Connection terminated|connection error|not queryable|ECONNRESET|ECONNREFUSED|timeout exceeded when trying to connect/i.test(
    messageOf(error),
  );
}

/**
 * An error a consumer throws to be retried on purpose while it waits for something bounded (e.g. the webhook
 * recorder waiting, at most a few minutes, for another scope's stream): retried, never parked.
 */
export function isDeclaredRetryable(error: unknown): boolean {
  return (error as { retryable?: unknown } | null)?.retryable === true;
}

/** ethers v6 error codes of a node that did not answer (not a revert or a bad argument: those are the call's own). */
const ETHERS_OUTAGE_CODES = new Set(['SERVER_ERROR', 'NETWORK_ERROR', 'TIMEOUT']);
/** gRPC status codes UNAVAILABLE (14) and DEADLINE_EXCEEDED (4), numeric in grpc-js, named in some clients. */
const GRPC_OUTAGE_CODES = new Set<unknown>(['UNAVAILABLE', 'DEADLINE_EXCEEDED']);
const GRPC_OUTAGE_NUMBERS = new Set<unknown>([14, 4]);
/** Socket and DNS errors of Node and undici (fetch): the other side is not reachable right now. */
const SOCKET_CODES =
  /^(ECONNREFUSED|ECONNRESET|ECONNABORTED|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENETDOWN|EPIPE|EAI_AGAIN|ENOTFOUND|UND_ERR_(CONNECT_TIMEOUT|HEADERS_TIMEOUT|BODY_TIMEOUT|SOCKET|CLOSED))$/;

/** A dependency other than our database is unreachable or did not answer in time (see the classification above). */
export function isDependencyOutage(error: unknown): boolean {
  // Wrapped errors: ethers keeps the transport's error in `error`, fetch and most libraries in `cause`.
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    const e = current as {
      code?: unknown;
      details?: unknown;
      metadata?: unknown;
      cause?: unknown;
      error?: unknown;
    };
    if (typeof e.code === 'string' && (ETHERS_OUTAGE_CODES.has(e.code) || GRPC_OUTAGE_CODES.has(e.code)))
      return true;
    if (typeof e.code === 'string' && SOCKET_CODES.test(e.code)) return true;
    // A grpc-js ServiceError carries `details` and `metadata` next to its numeric code.
    if (GRPC_OUTAGE_NUMBERS.has(e.code) && ('details' in e || 'metadata' in e)) return true;
    current = e.cause ?? e.error;
  }
  return false;
}

export function isTransient(error: unknown): boolean {
  if (isConnectionLoss(error) || isDeclaredRetryable(error) || isDependencyOutage(error)) return true;
  const code = codeOf(error);
  if (code !== undefined && (/^(40|53|57|58|XX)/.test(code) || code === '55P03')) return true;
  return /timeout/i.test(messageOf(error));
}
