/**
 * A dependency a consumer needs did not answer, told by the consumer (an adapter that reports it as an answer, such
 * as the sanctions screening's `unreachable`, leaves failure-kind nothing to classify). `retryable` while the
 * message is within its grace (see OutageGrace): the supervised bus retries it in place with the bus's short
 * back-off and never parks it. Past it, a plain failure: the message is parked and retried automatically from 60 s
 * up to every 30 min, and the consumer's other messages go on.
 */
export class DependencyUnavailableError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'DependencyUnavailableError';
  }
}

/** Messages whose first failure is remembered at most (the oldest go first): a bound, not a limit anything reaches. */
const MAX_TRACKED = 10_000;

/**
 * The bounded outage rule of a consumer whose dependency may be down for everyone or refuse one subject for good
 * (a screening provider answering an error for one address): each message gets `graceMs` from its first failure
 * of this kind, retried in place as an outage (a short outage delays the group, parks nothing), then is parked (a
 * subject refused for good holds the group for `graceMs` once, not forever). Counted per message id, which is the
 * same on every redelivery and on a parked message's retries; in memory, so a restart grants a message a new grace.
 * The time comes from the caller (the service clock), so tests move it instead of waiting.
 */
export class OutageGrace {
  private readonly since = new Map<string, number>();

  constructor(readonly graceMs: number) {}

  /** The error for `messageId` failing now for `reason`: retryable within its grace, then not. */
  unavailable(messageId: string, reason: string, now: Date): DependencyUnavailableError {
    const at = now.getTime();
    const first = this.since.get(messageId) ?? at;
    if (!this.since.has(messageId)) {
      this.since.set(messageId, first);
      if (this.since.size > MAX_TRACKED) {
        const oldest = this.since.keys().next().value;
        if (oldest !== undefined) this.since.delete(oldest);
      }
    }
    const within = at - first < this.graceMs;
    return new DependencyUnavailableError(
      within
        ? `${reason}; retried as an outage for up to ${String(this.graceMs / 1000)} s`
        : `${reason} for ${String(Math.round((at - first) / 1000))} s; parked, retried with back-off`,
      within,
    );
  }

  /** The dependency answered for `messageId`: a later outage starts a new grace. */
  answered(messageId: string): void {
    this.since.delete(messageId);
  }
}
