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

export function isTransient(error: unknown): boolean {
  if (isConnectionLoss(error) || isDeclaredRetryable(error)) return true;
  const code = codeOf(error);
  if (code !== undefined && (/^(40|53|57|58|XX)/.test(code) || code === '55P03')) return true;
  return /timeout/i.test(messageOf(error));
}
