import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { EventStore } from '@stablepay/event-store';
import { toBusMessage } from '../bus-message';
import type { BusMessage, BusSubscription, ConsumeOptions, EventBus } from '../event-bus.port';
import { ParkedStreamNotifications } from '../projection/parked-stream-notifications';
import type { ProjectionLogger, RetryOutcome } from '../projection/projection-runner';
import { Mutex } from '../serial';
import {
  ConsumerHealth,
  ConsumerHealthRegistry,
  type ConsumerHealthSettings,
  consumerMetrics,
} from './consumer-health';
import { isConnectionLoss, isDeclaredRetryable, isDependencyOutage, isTransient } from './failure-kind';

export interface ConsumerSupervisionSettings extends ConsumerHealthSettings {
  /**
   * Failed calls in a row of one delivery after which it gets one message-by-message isolate pass, where a message
   * that fails again is parked. Default 10 (about 16 s with the buses' default back-off).
   */
  readonly isolateAfterFailures?: number;
  /**
   * How often requested (and due automatic) retries of parked streams are looked for where `parked_streams`
   * notifications are not heard (the embedded PGlite server, a pool of one, the listening connection down).
   * Default 1 s.
   */
  readonly retryPollMs?: number;
  /**
   * The same while they are heard: a notification (a park, a release, a retry asked for, by any process) polls at
   * once, so this poll is only the safety net for one sent while the listening connection was down; an automatic
   * retry or another member's claim falling due is polled for when it does. Default 30 s.
   */
  readonly notifiedRetryPollMs?: number;
  /**
   * First automatic retry of a parked stream after this long, doubling with each failed retry up to 30 min
   * (a dependency that was down for longer than the isolate pass, e.g. a chain node, needs no operator).
   * 0 turns automatic retries off. Default 60 s.
   */
  readonly autoRetryAfterMs?: number;
  /**
   * How long a member's claim on retrying a parked stream lasts unless renewed (before each message and each third
   * of it while a handler call runs): a crashed member's claim lets another member retry the stream after it.
   * Default 60 s.
   */
  readonly retryClaimMs?: number;
}

export interface ConsumerSupervisionDeps {
  /** Where parked streams are kept (`parked_streams`, shared with the projections); without it nothing is parked. */
  readonly dataSource?: Pick<DataSource, 'query'>;
  /** A retry reads the parked stream from the parked message on. */
  readonly store?: Pick<EventStore, 'readStream'>;
  readonly logger: ProjectionLogger;
  readonly settings?: ConsumerSupervisionSettings;
}

const DEFAULT_ISOLATE_AFTER_FAILURES = 10;
const DEFAULT_RETRY_POLL_MS = 1_000;
const DEFAULT_NOTIFIED_RETRY_POLL_MS = 30_000;
const DEFAULT_AUTO_RETRY_AFTER_MS = 60_000;
const DEFAULT_RETRY_CLAIM_MS = 60_000;
const AUTO_RETRY_MAX_SECONDS = 1_800;
/** Events a retry reads per call: a key within a long stream (a chain's observations) reads its stream in pages. */
const RETRY_PAGE = 500;
/** A parked row's key and the stream it is in (the key itself when the consumer isolates per stream). */
const PARKED_KEY = 'stream_id, coalesce(source_stream_id, stream_id) AS source';
interface ParkedKeyRow {
  readonly stream_id: string;
  readonly source: string;
}
/**
 * Whether a parked row's retry is due: asked for, or its automatic retry's time came (see dueParameters). The n-th
 * automatic retry (attempts = n) comes the sum of the first n delays after parking, each delay doubling from $2 up
 * to $3: `$2 * (2^k - 1)` for the k delays below the cap, plus `$3` for each one after. Measured from parked_at
 * alone with a capped delay, every retry after the cap's time would be due at once, each second, forever.
 */
const AUTO_RETRY_AT = `parked_at + make_interval(secs =>
            $2::float8 * (2 ^ LEAST(attempts, GREATEST(0, floor(ln($3::float8 / NULLIF($2::float8, 0)) / ln(2)) + 1)) - 1)
          + $3::float8 * GREATEST(0, attempts - GREATEST(0, floor(ln($3::float8 / NULLIF($2::float8, 0)) / ln(2)) + 1))
        )`;
export const RETRY_DUE = `(retry_requested_at IS NOT NULL OR ($2::float8 > 0 AND ${AUTO_RETRY_AT} <= now()))`;
/**
 * Milliseconds until a row that is not due now needs a poll: its automatic retry falls due, or another member's
 * claim on its retry expires (a member that died holding it). Null: nothing to wait for but a notification.
 */
const DUE_IN_MS = `extract(epoch FROM LEAST(
    CASE WHEN $2::float8 > 0 AND NOT ${RETRY_DUE} THEN ${AUTO_RETRY_AT} END,
    CASE WHEN retry_claimed_until > now() THEN retry_claimed_until END) - now())::float8 * 1000`;

/**
 * The bus every consumer of a process gets (EventSourcingModule wraps the configured adapter, store log or Kafka),
 * so no consumer can forget health tracking or isolation:
 *
 * - Health: each group's failures in a row and time of last progress per topic, and pending work (ConsumerHealth),
 *   in `health` for /ready and in the `stablepay_consumer_*` gauges.
 * - Isolation, for every consumer that does not isolate itself (the projection runner does, in its transaction):
 *   a delivery that fails `isolateAfterFailures` times in a row (counted per delivery, by its first message id, so
 *   another topic's successes in between do not reset it; never at once: a consumer's failures are often a
 *   dependency's, which passes) is handled again message by message; a message that fails again is PARKED: a
 *   `parked_streams` row under the group's name, an error log and a metric. Its stream's later messages wait
 *   behind it (recorded as the row's waiting revision; per-stream order holds) and every other stream goes on.
 *   Parked means NOT PROCESSED YET, never dropped: a retry (operator, through the same admin route and CLI as
 *   projections, or automatic with back-off) reads the stream from the parked message on and hands each message
 *   to the handler in order; the row goes once all of them succeeded (a retry that cannot delete it
 *   moves it to the newest message handled and is put off as a failed one). Handlers are idempotent by message id
 *   already (at-least-once delivery), so a message handled by the retry and delivered again later has no second
 *   effect. A lost database connection and an outage of another dependency (chain node, gRPC service, socket
 *   errors) are never parked, only retried (the group shows as stalled while it lasts); a transient failure is
 *   parked only when the database answers (the event's own timeout, not an outage of ours).
 *
 * Several members (Kafka): each member reloads the group's parked streams at every retry poll (one statement per
 * bus for all its groups) and, before handling a new partition assignment, when the adapter announces it
 * (`onAssigned`), so a member that takes over a partition never handles a later message of a stream another member
 * parked. A parked row and a live delivery
 * never interleave: in this process they share one queue; across processes the live path sets the waiting
 * revision with one UPDATE and the retry deletes the row only if nothing newer waits, so exactly one of them
 * handles each later message. Retries run in whichever member polls first, under a claim on the row (renewed
 * while the retry runs, expiring if its member dies), so two members never retry one stream at once, and a retry
 * holds no connection of the pool while its handler runs.
 */
export class SupervisedEventBus implements EventBus {
  readonly health = new ConsumerHealthRegistry();
  private readonly consumers = new Set<SupervisedConsumer>();
  private pollTimer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  /** A poll asked for (notified, or a group done with retries that sat one out) while one was running. */
  private pollAgain = false;
  /** From the last poll until its earliest row falling due (an automatic retry, a claim expiring); none: undefined. */
  private nextDueInMs: number | undefined;
  private notifications: ParkedStreamNotifications | undefined;
  private readonly unsubscribes = new Map<SupervisedConsumer, () => Promise<void>>();
  private closed = false;
  private pollFailing = false;

  constructor(
    readonly inner: EventBus,
    private readonly deps: ConsumerSupervisionDeps,
  ) {}

  publish(messages: readonly BusMessage[]): Promise<void> {
    return this.inner.publish(messages);
  }

  async consume(options: ConsumeOptions): Promise<BusSubscription> {
    const consumer = new SupervisedConsumer(options, this.deps);
    await consumer.start(this.inner);
    this.health.add(consumer.health);
    this.consumers.add(consumer);
    if (!consumer.isolatesItself) {
      await this.listen(consumer);
      this.schedulePoll();
    }
    return {
      caughtUp: () => consumer.caughtUp(),
      stop: async () => {
        this.consumers.delete(consumer);
        this.health.remove(consumer.health);
        await consumer.stop();
        await this.unlisten(consumer);
      },
    };
  }

  /** The supervised consumer of a group, for an operator retry run in this process. */
  consumer(group: string): Pick<SupervisedConsumer, 'retry'> | undefined {
    return [...this.consumers].find((c) => c.group === group && !c.isolatesItself);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.pollTimer) clearTimeout(this.pollTimer);
    await Promise.all([...this.consumers].map((c) => c.stop()));
    await Promise.all([...this.consumers].map((c) => this.unlisten(c)));
    this.consumers.clear();
    this.health.close();
    await this.inner.close();
  }

  /**
   * The group hears the `parked_streams` notifications of its name (ParkedStreamNotifications, shared with the
   * process's projection runners): a park, a release or an operator's retry request, by any process, polls at once.
   */
  private async listen(consumer: SupervisedConsumer): Promise<void> {
    const dataSource = this.deps.dataSource;
    if (!dataSource) return;
    this.notifications ??= ParkedStreamNotifications.of(dataSource);
    const unsubscribe = await this.notifications.subscribe(
      consumer.group,
      () => this.pollNow(),
      (error) =>
        this.deps.logger.warn({
          msg: 'listening for parked stream changes failed; polled meanwhile',
          group: consumer.group,
          error: String(error),
        }),
    );
    this.unsubscribes.set(consumer, unsubscribe);
  }

  private async unlisten(consumer: SupervisedConsumer): Promise<void> {
    const unsubscribe = this.unsubscribes.get(consumer);
    this.unsubscribes.delete(consumer);
    await unsubscribe?.();
  }

  /**
   * The next poll: each second where notifications are not heard; while they are, only as a safety net (30 s) and
   * when a row falls due.
   */
  private schedulePoll(): void {
    if (this.closed) return;
    if (this.pollTimer) clearTimeout(this.pollTimer);
    const every = this.notifications?.listening
      ? (this.deps.settings?.notifiedRetryPollMs ?? DEFAULT_NOTIFIED_RETRY_POLL_MS)
      : (this.deps.settings?.retryPollMs ?? DEFAULT_RETRY_POLL_MS);
    // setTimeout fires at once for more than 2^31 - 1 ms.
    this.pollTimer = setTimeout(
      () => this.pollNow(),
      Math.min(every, this.nextDueInMs ?? every, 2 ** 31 - 1),
    );
    this.pollTimer.unref();
  }

  /** One poll at a time: one asked for meanwhile runs after it (folded with any other), then the next is scheduled. */
  private pollNow(): void {
    if (this.closed) return;
    if (this.polling) {
      this.pollAgain = true;
      return;
    }
    this.pollAgain = false;
    this.polling = this.poll().finally(() => {
      this.polling = undefined;
      if (this.pollAgain) this.pollNow();
      else this.schedulePoll();
    });
  }

  /**
   * Each poll, one statement for every supervised group of this bus (not one per group, each second, idle or not):
   * their parked rows and which are due. Each group then reloads its parked set and runs its due retries in its own
   * queue; a group still busy with the previous poll's retries sits this one out.
   */
  private async poll(): Promise<void> {
    const consumers = [...this.consumers].filter((c) => c.beginPoll(() => this.pollNow()));
    this.nextDueInMs = undefined;
    if (consumers.length === 0) return;
    const dataSource = this.deps.dataSource;
    try {
      if (!dataSource) throw new Error('parking needs the database');
      const rows: Array<ParkedKeyRow & { projection: string; due: boolean; due_in_ms: number | null }> =
        await dataSource.query(
          `SELECT projection, ${PARKED_KEY}, ${RETRY_DUE} AS due, ${DUE_IN_MS} AS due_in_ms
             FROM parked_streams WHERE projection = ANY($1::text[]) ORDER BY parked_at`,
          [[...new Set(consumers.map((c) => c.group))], ...dueSettings(this.deps.settings)],
        );
      const later = rows.flatMap((r) => (r.due_in_ms !== null && r.due_in_ms > 0 ? [r.due_in_ms] : []));
      this.nextDueInMs = later.length > 0 ? Math.ceil(Math.min(...later)) : undefined;
      for (const consumer of consumers) consumer.polled(rows.filter((r) => r.projection === consumer.group));
      this.pollFailing = false;
    } catch (error) {
      for (const consumer of consumers) consumer.polled(undefined);
      // The bus polls each second while not notified: a database outage is told once, not once a second.
      if (!this.pollFailing)
        this.deps.logger.warn({
          msg: 'reading parked streams failed (told once until a poll succeeds)',
          groups: consumers.map((c) => c.group),
          error: String(error),
        });
      this.pollFailing = true;
    }
  }
}

/** $2 first automatic retry (s, 0 = off), $3 its longest delay (s): the parameters of RETRY_DUE after the group. */
function dueSettings(settings: ConsumerSupervisionSettings | undefined): [number, number] {
  return [(settings?.autoRetryAfterMs ?? DEFAULT_AUTO_RETRY_AFTER_MS) / 1000, AUTO_RETRY_MAX_SECONDS];
}

/** Failure counts kept per message id at most (old entries go first): a bound, not a limit anything reaches. */
const MAX_TRACKED_FAILURES = 10_000;

/**
 * What a retry of this group answers: `requested` when it could not run to its end here (another member holds the
 * stream's retry, or this one stopped or lost its claim) and the stream is still parked: the operator's request is
 * on the row and the member that runs the stream's next retry (whichever polls first) serves it. `applied` also when
 * another retry released the stream while this one waited; `not_parked` when the group had no row for the stream as
 * the request arrived.
 */
export type ConsumerRetryOutcome = RetryOutcome | 'requested';

/** retryClaimed's answer when it ended before the stream's messages were all tried (stopped, claim lost). */
type ClaimedRetryOutcome = ConsumerRetryOutcome | 'interrupted';

/** This member's claim on retrying one parked stream (SupervisedConsumer.claimRetry). */
interface RetryClaim {
  readonly token: string;
  /**
   * When the claim was taken, on the database's clock: the operator requests before it are this retry's. Its text,
   * to the microsecond: as a Date (milliseconds) a request recorded in the same millisecond just before the claim
   * outlived the retry that served it, and was retried again at once (now that the retry's own UPDATE notifies).
   */
  readonly started: string;
  readonly ms: number;
  /** Extends the claim; false when it is no longer this member's (the row gone or taken over). */
  renew(): Promise<boolean>;
  release(): Promise<void>;
}

class SupervisedConsumer {
  readonly health: ConsumerHealth;
  private subscription: BusSubscription | undefined;
  private readonly serial = new Mutex();
  /**
   * The group's parked keys (`parked_streams.stream_id`: the stream, or the consumer's isolation key within it)
   * and the stream each one is in, by any member: loaded at start, on each partition assignment the adapter
   * announces and at every retry poll (always, also when empty: another member may park a stream or an operator
   * request a retry at any time).
   */
  private readonly parked = new Map<string, string>();
  /**
   * Failed calls in a row per delivery, keyed by the id of its first message: a success of another delivery (another
   * topic's subscription on the store-log bus, which retries independently) does not reset a failing one's count.
   */
  private readonly failures = new Map<string, number>();
  /** Keys parked here while the bus's poll read the table: its rows may predate them, so they are kept. */
  private parkedSinceRead: Set<string> | undefined;
  private polling: Promise<void> | undefined;
  /** Asked to poll again once done: a poll came (a notification's) while this group was busy with the last one's. */
  private pollAgain: (() => void) | undefined;
  private pollFailing = false;
  private stopped = false;

  constructor(
    private readonly options: ConsumeOptions,
    private readonly deps: ConsumerSupervisionDeps,
  ) {
    this.health = new ConsumerHealth(options.group, this.isolatesItself, deps.settings);
  }

  get group(): string {
    return this.options.group;
  }

  get isolatesItself(): boolean {
    return this.options.isolatesItself === true || !this.deps.dataSource;
  }

  async start(bus: EventBus): Promise<void> {
    if (!this.isolatesItself) await this.refreshParked();
    const handleBatch = this.options.handleBatch;
    this.subscription = await bus.consume({
      ...this.options,
      handler: (message) => this.handle([message]),
      ...(handleBatch ? { handleBatch: (messages) => this.handle(messages) } : {}),
      ...(this.isolatesItself ? {} : { onAssigned: () => this.serial.run(() => this.refreshParked()) }),
    });
    const subscription = this.subscription;
    this.health.startProbing(() => subscription.caughtUp());
  }

  /**
   * Whether this group takes part in the bus's poll (not stopped, done with the last one's retries). A group still
   * busy calls `again` when done: the poll it sat out may have been a notification's, which comes only once.
   */
  beginPoll(again: () => void): boolean {
    if (this.isolatesItself || this.stopped) return false;
    if (this.polling || this.parkedSinceRead) {
      this.pollAgain = again;
      return false;
    }
    this.parkedSinceRead = new Set();
    return true;
  }

  /** The poll's rows of this group (undefined: the read failed); the retries run as this group's own tasks. */
  polled(rows: ReadonlyArray<ParkedKeyRow & { due: boolean }> | undefined): void {
    if (!rows) {
      this.parkedSinceRead = undefined;
      return;
    }
    this.polling = this.retryDue(rows).finally(() => {
      this.polling = undefined;
      const again = this.pollAgain;
      this.pollAgain = undefined;
      if (again && !this.stopped) again();
    });
  }

  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  /**
   * Stops the subscription; a retry in progress ends after its current handler call (the stream stays parked, from
   * where it stood), and no other retry starts: stop waits for at most one handler call, not for every due retry.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.health.stopProbing();
    await this.subscription?.stop();
    await this.serial.run(async () => undefined);
  }

  /**
   * An operator's retry of a parked stream of this group, run now (in order with live deliveries). The request is
   * recorded on the row first, before it waits in the queue: a retry this member cannot run to its end (another
   * member holds the stream, this one stops or loses its claim) is served by the member that runs the stream's next
   * retry, and answered `requested`, not as if it had run. A retry that starts after it clears it (released, or
   * failing again). Not parked: the map is left to the next poll (dropped here, outside the queue, it could drop a
   * key a live delivery is parking).
   *
   * The answer is the row's (the truth every member shares): `not_parked` when the group has no row for the stream
   * as the request arrives. One that had a row but did not run here to its end is `requested` only if the row is
   * still there (the request recorded on it again: a live delivery may have parked the stream anew, a retry that
   * started after the first recording may have served it); gone, another retry (a due one queued ahead of it, an
   * earlier request's, another member's) released the stream meanwhile, which is `applied`: `requested` promised
   * a retry no one would run.
   */
  async retry(streamId: string): Promise<ConsumerRetryOutcome> {
    if (!(await this.recordRequest(streamId))) return 'not_parked';
    const outcome = await this.serial.run(() => this.retryNow(streamId));
    if (outcome !== 'requested') return outcome;
    return (await this.recordRequest(streamId)) ? 'requested' : 'applied';
  }

  private handle(messages: readonly BusMessage[]): Promise<void> {
    return this.serial.run(async () => {
      this.health.began(messages);
      try {
        if (this.isolatesItself) await this.call(messages);
        else await this.handleIsolating(messages);
      } catch (error) {
        this.health.failed(error, messages);
        throw error;
      }
      this.health.succeeded(messages);
    });
  }

  /** The consumer's own handling of a delivery (its batch form when it has one). */
  private async call(messages: readonly BusMessage[]): Promise<void> {
    if (this.options.handleBatch) {
      await this.options.handleBatch(messages);
      return;
    }
    for (const message of messages) await this.options.handler(message);
  }

  private async handleIsolating(messages: readonly BusMessage[]): Promise<void> {
    const { live, held } = await this.withoutParked(messages);
    const first = live[0];
    if (first) await this.handleLive(live, first);
    if (held) throw new UnattributedMessageWaits(this.group, held);
  }

  private async handleLive(live: readonly BusMessage[], first: BusMessage): Promise<void> {
    try {
      await this.call(live);
      for (const message of live) this.failures.delete(message.id);
      return;
    } catch (error) {
      const count = (this.failures.get(first.id) ?? 0) + 1;
      this.failures.delete(first.id);
      this.failures.set(first.id, count);
      if (this.failures.size > MAX_TRACKED_FAILURES) {
        const oldest = this.failures.keys().next().value;
        if (oldest !== undefined) this.failures.delete(oldest);
      }
      const isolateAfter = this.deps.settings?.isolateAfterFailures ?? DEFAULT_ISOLATE_AFTER_FAILURES;
      if (count < isolateAfter || neverParked(error)) throw error;
    }
    await this.isolate(live);
    for (const message of live) this.failures.delete(message.id);
  }

  /**
   * Message by message: what fails again is parked (its key's later messages wait), the rest is handled. The
   * messages come from withoutParked; one that cannot be attributed to a key waits once a message before it in
   * this pass parked a key of its stream (the whole delivery is redelivered; what was handled has no second effect).
   */
  private async isolate(messages: readonly BusMessage[]): Promise<void> {
    for (const message of messages) {
      const key = this.keyOf(message);
      const waitOn = this.parkedBefore(message, key);
      if (waitOn === HELD) throw new UnattributedMessageWaits(this.group, message);
      if (waitOn !== undefined && (await this.markWaiting(message, waitOn))) continue;
      try {
        await this.call([message]);
      } catch (error) {
        if (neverParked(error)) throw error;
        if (isTransient(error) && !(await this.databaseAnswers())) throw error;
        // Unattributed, it may belong to any key of its stream: it parks the whole stream (every later message of
        // the stream waits behind it), which keeps every key's order and shows the stall in parked_streams; retried
        // in place forever instead, it would hold the stream's partition with nothing for an operator to retry.
        await this.park(message, key ?? message.key, error);
      }
    }
  }

  /**
   * The messages of keys not parked; the others are recorded as waiting behind their parked message. A message
   * the consumer cannot attribute to a key while a key of its stream is parked is `held` (it may belong to that
   * key): it and everything after it are left for the redelivery, so the stream's order holds.
   */
  private async withoutParked(
    messages: readonly BusMessage[],
  ): Promise<{ live: BusMessage[]; held?: BusMessage }> {
    if (this.parked.size === 0) return { live: [...messages] };
    const live: BusMessage[] = [];
    for (const message of messages) {
      const waitOn = this.parkedBefore(message, this.keyOf(message));
      if (waitOn === HELD) return { live, held: message };
      if (waitOn !== undefined && (await this.markWaiting(message, waitOn))) continue;
      live.push(message);
    }
    return { live };
  }

  /** The message's isolation key: the consumer's, or its stream. */
  private keyOf(message: BusMessage): string | undefined {
    const isolationKey = this.options.isolationKey;
    return isolationKey ? isolationKey(message) : message.key;
  }

  /**
   * The parked row a message must wait behind, if any: its whole stream's (a row parked per stream, by a member
   * or a version without the consumer's isolation key: every message of the stream waited behind it), else its
   * key's; HELD when it has no key and a key of its stream is parked.
   */
  private parkedBefore(message: BusMessage, key: string | undefined): string | typeof HELD | undefined {
    if (this.parked.has(message.key)) return message.key;
    if (key === undefined) return this.holdsFinerKey(message.key) ? HELD : undefined;
    return this.parked.has(key) ? key : undefined;
  }

  /** Whether a key within this stream (not the stream itself) is parked. */
  private holdsFinerKey(streamId: string): boolean {
    for (const [key, source] of this.parked) if (source === streamId && key !== streamId) return true;
    return false;
  }

  /**
   * What a retry of the parked `streamId` does with a message of its source stream: its own key's messages are
   * handled and others skipped (theirs, handled live or parked under their own key). A whole stream parked (the
   * key is the stream) had every message of it waiting behind it, so it handles all of them but those of a key
   * parked on its own (whose retry reads them in its order). It stops before a message it cannot attribute that
   * may belong to a parked key (the live path holds it; released, the live path handles it and what follows).
   */
  private retryStep(streamId: string, message: BusMessage): 'handle' | 'skip' | 'stop' {
    const key = this.keyOf(message);
    if (message.key !== streamId) {
      if (key === undefined) return 'stop';
      return key === streamId ? 'handle' : 'skip';
    }
    if (key === undefined) return this.holdsFinerKey(streamId) ? 'stop' : 'handle';
    return key !== streamId && this.parked.has(key) ? 'skip' : 'handle';
  }

  /** True when the key is still parked (the message now waits behind it); false when a retry released it. */
  private async markWaiting(message: BusMessage, key: string): Promise<boolean> {
    const result: unknown[] = await this.query(
      `UPDATE parked_streams SET waiting_revision = GREATEST(coalesce(waiting_revision, -1), $3)
        WHERE projection = $1 AND stream_id = $2 RETURNING stream_id`,
      [this.group, key, message.revision],
    );
    if (affectedRows(result) === 0) {
      this.parked.delete(key);
      this.countParked();
      return false;
    }
    consumerMetrics.messages.inc({ group: this.group, outcome: 'waiting' });
    return true;
  }

  private async park(message: BusMessage, key: string, error: unknown): Promise<void> {
    const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    // A row another member left (or an earlier run) holds an older message: this one waits behind it.
    await this.query(
      `INSERT INTO parked_streams (projection, stream_id, source_stream_id, event_id, revision, event_type, error)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (projection, stream_id) DO UPDATE
         SET waiting_revision = GREATEST(coalesce(parked_streams.waiting_revision, -1), EXCLUDED.revision)`,
      [
        this.group,
        key,
        key === message.key ? null : message.key,
        message.id,
        message.revision,
        message.type,
        reason,
      ],
    );
    this.parked.set(key, message.key);
    this.parkedSinceRead?.add(key);
    this.countParked();
    consumerMetrics.messages.inc({ group: this.group, outcome: 'parked' });
    this.deps.logger.error({
      msg: 'consumer parked a stream: a message keeps failing; the stream waits for a retry, every other stream goes on',
      group: this.group,
      streamId: key,
      ...(key === message.key ? {} : { sourceStreamId: message.key }),
      eventId: message.id,
      revision: message.revision,
      type: message.type,
      error: reason,
    });
  }

  /**
   * Each poll: reloads the group's parked set (another member may have parked or released a stream) and retries
   * the streams an operator asked for and those whose automatic retry is due, whichever member parked them. Each
   * stream is retried as its own task, so live deliveries and a stop get in between; nothing starts after stop.
   */
  private async retryDue(rows: ReadonlyArray<ParkedKeyRow & { due: boolean }>): Promise<void> {
    try {
      const due = await this.serial.run(async () => {
        // Read outside the queue: a key this group parked meanwhile stays (a released one costs a waiting UPDATE
        // that finds no row, which drops it).
        const since = this.parkedSinceRead ?? new Set<string>();
        this.parkedSinceRead = undefined;
        if (this.stopped) return [];
        const kept = [...since].flatMap((key) => {
          const source = this.parked.get(key);
          return source === undefined || rows.some((r) => r.stream_id === key)
            ? []
            : [{ stream_id: key, source }];
        });
        this.replaceParked([...rows, ...kept]);
        return rows.filter((r) => r.due).map((r) => r.stream_id);
      });
      for (const streamId of due) {
        if (this.stopped) break;
        await this.serial.run(async () => {
          if (!this.stopped) await this.retryNow(streamId, { onlyIfDue: true });
        });
      }
      this.pollFailing = false;
    } catch (error) {
      // Polled each second: a retry failing on every poll (the database away) is told once, not once a second.
      if (!this.pollFailing)
        this.deps.logger.warn({
          msg: 'retrying parked streams failed (told once until a poll succeeds)',
          group: this.group,
          error: String(error),
        });
      this.pollFailing = true;
    }
  }

  /**
   * Hands the parked stream's messages, from the parked one on, to the handler in order; releases the stream once
   * all of them succeeded and nothing newer waits (otherwise reads on from where it stopped). Only one member of the
   * group retries a stream at a time: the retry claims the row (one conditional UPDATE, due or asked for, and no
   * live claim of another member) and a member that finds it claimed leaves the stream to the other. A claim, not a
   * lock held on a connection: a pool of 10 would otherwise lend one to each group retrying, for the whole retry.
   */
  private async retryNow(
    streamId: string,
    when: { onlyIfDue?: boolean } = {},
  ): Promise<ConsumerRetryOutcome> {
    const store = this.deps.store;
    if (!store) throw new Error(`consumer ${this.group}: retrying a parked stream needs the event store`);
    // An operator's retry (`retry`) has its request on the row already: one that does not run to its end here is
    // left to the member that runs the next retry.
    const operator = when.onlyIfDue !== true;
    const notRun = operator ? 'requested' : 'still_parked';
    if (this.stopped) return notRun;
    const claim = await this.claimRetry(streamId, !operator);
    // Another member retries the stream (or the poll's retry is not due): the request waits for it on the row. Or
    // there is no row any more (a retry ahead of this one released the stream): `retry` tells that from the row.
    if (!claim) return notRun;
    // A handler call may outlast the claim: renewed meanwhile, so no other member takes the stream from a live retry.
    const renewal = setInterval(() => void claim.renew().catch(() => undefined), claim.ms / 3);
    renewal.unref();
    let outcome: ClaimedRetryOutcome | undefined;
    try {
      outcome = await this.retryClaimed(store, streamId, claim);
      return outcome === 'interrupted' ? notRun : outcome;
    } finally {
      clearInterval(renewal);
      // Released at once (the row is gone when the stream was released): the next poll need not wait for expiry.
      // A retry that threw (the database or the store failing, its back-off unrecorded) keeps its claim until it
      // expires, so the stream is retried after that, not again at every poll.
      if (outcome !== undefined && outcome !== 'applied') await claim.release();
    }
  }

  /** Records an operator's request to retry the stream (the newest request stays); false when it is not parked. */
  private async recordRequest(streamId: string): Promise<boolean> {
    const requested: unknown[] = await this.query(
      `UPDATE parked_streams SET retry_requested_at = GREATEST(retry_requested_at, clock_timestamp())
        WHERE projection = $1 AND stream_id = $2 RETURNING stream_id`,
      [this.group, streamId],
    );
    return affectedRows(requested) > 0;
  }

  private async retryClaimed(
    store: Pick<EventStore, 'readStream'>,
    streamId: string,
    claim: RetryClaim,
  ): Promise<ClaimedRetryOutcome> {
    let from: number | undefined;
    /** The newest message this retry handled: where the row moves to when it cannot be released. */
    let lastHandled: BusMessage | undefined;
    for (;;) {
      const rows: Array<{ revision: number; source: string; mine: boolean }> = await this.query(
        `SELECT revision, coalesce(source_stream_id, stream_id) AS source,
                retry_claimed_by IS NOT DISTINCT FROM $3 AS mine
           FROM parked_streams WHERE projection = $1 AND stream_id = $2`,
        [this.group, streamId, claim.token],
      );
      const row = rows[0];
      if (!row) {
        this.parked.delete(streamId);
        this.countParked();
        return 'not_parked';
      }
      if (!row.mine) return 'interrupted';
      const start = from ?? row.revision;
      // The stream's messages of this key, from the parked one on; a key within a long stream (a chain's) is read
      // page by page. Other keys' messages are theirs (handled live, or parked under their own key).
      let newest = start - 1;
      let handled = 0;
      let unattributed = false;
      reading: for (;;) {
        const page = await store.readStream(row.source, { fromRevision: newest + 1, maxCount: RETRY_PAGE });
        for (const message of page.map(toBusMessage)) {
          // Stopping: the stream stays parked; what this retry handled comes again with the next one (idempotent).
          if (this.stopped) return 'interrupted';
          const step = this.retryStep(streamId, message);
          if (step === 'stop') {
            unattributed = true;
            break reading;
          }
          if (step === 'handle') {
            // Lost (this member stalled past the claim and another took the stream over): left to that member.
            if (!(await claim.renew())) {
              this.deps.logger.warn({
                msg: 'retry of a parked stream stopped: another member took over its expired claim',
                group: this.group,
                streamId,
              });
              return 'interrupted';
            }
            try {
              await this.call([message]);
            } catch (error) {
              await this.putOff(streamId, claim, describe(error), message);
              this.deps.logger.warn({
                msg: 'retried parked stream still fails; it stays parked',
                group: this.group,
                streamId,
                eventId: message.id,
                error: describe(error),
              });
              return 'still_parked';
            }
            handled++;
            lastHandled = message;
          }
          newest = message.revision;
        }
        if (page.length < RETRY_PAGE) break;
      }
      let released: unknown[];
      try {
        released = await this.query(
          `DELETE FROM parked_streams
            WHERE projection = $1 AND stream_id = $2 AND coalesce(waiting_revision, -1) <= $3
              AND retry_claimed_by = $4
            RETURNING stream_id`,
          [this.group, streamId, newest, claim.token],
        );
      } catch (error) {
        // Handled, but the row stays: due as it was, it would be retried at once and for ever, each time handling
        // the stream again. It moves to the newest message handled (the next retry hands only that one again,
        // idempotent by id) and its retry is put off as a failed one's; if even that cannot be written, the claim
        // is kept (retryNow) and the next retry waits for its expiry.
        await this.putOff(
          streamId,
          claim,
          `releasing the retried stream failed: ${describe(error)}`,
          lastHandled,
        );
        this.deps.logger.warn({
          msg: 'retried parked stream was handled but releasing it failed; it stays parked, its next retry releases it',
          group: this.group,
          streamId,
          handledThrough: lastHandled?.revision,
          error: describe(error),
        });
        return 'still_parked';
      }
      if (affectedRows(released) > 0) {
        this.parked.delete(streamId);
        this.countParked();
        consumerMetrics.messages.inc({ group: this.group, outcome: 'released' }, handled);
        this.deps.logger.log({ msg: 'parked stream released', group: this.group, streamId });
        return 'applied';
      }
      if (unattributed) {
        // A later message of this key waits although the live path stopped before it: not expected; kept parked
        // (told) rather than handled out of order, and put off as a failed retry (due as it was, it would run
        // again at every poll and stop there again).
        await this.putOff(
          streamId,
          claim,
          'a later message of the stream waits behind a message the retry cannot attribute to a key',
          lastHandled,
        );
        this.deps.logger.warn({
          msg: 'retried parked stream has later messages waiting behind a message of its stream it cannot attribute; it stays parked',
          group: this.group,
          streamId,
        });
        return 'still_parked';
      }
      from = newest + 1;
    }
  }

  /**
   * Records on the row why the retry did not release the stream and puts the next automatic retry off as a failed
   * one's (attempts; the requests older than this retry's start were served by it). `at` becomes the row's message:
   * the one that failed, or the newest one handled (a retry reads from the row's message on).
   */
  private async putOff(streamId: string, claim: RetryClaim, reason: string, at?: BusMessage): Promise<void> {
    await this.query(
      `UPDATE parked_streams SET error = $3, attempts = attempts + 1,
              retry_requested_at = CASE WHEN retry_requested_at <= $4 THEN NULL ELSE retry_requested_at END,
              event_id = coalesce($6, event_id), revision = coalesce($7::int, revision),
              event_type = coalesce($8, event_type)
        WHERE projection = $1 AND stream_id = $2 AND retry_claimed_by = $5`,
      [
        this.group,
        streamId,
        reason,
        claim.started,
        claim.token,
        at?.id ?? null,
        at?.revision ?? null,
        at?.type ?? null,
      ],
    );
  }

  /**
   * Claims the group's retry of a stream for this member (when due, unless asked for), or answers undefined when
   * another member holds a live claim, the stream is not parked or its retry is not due.
   */
  private async claimRetry(streamId: string, onlyIfDue: boolean): Promise<RetryClaim | undefined> {
    const ms = this.deps.settings?.retryClaimMs ?? DEFAULT_RETRY_CLAIM_MS;
    const token = randomUUID();
    const claimed: unknown[] = await this.query(
      `UPDATE parked_streams
          SET retry_claimed_by = $5, retry_claimed_until = clock_timestamp() + make_interval(secs => $6::float8)
        WHERE projection = $1 AND stream_id = $4
          AND (retry_claimed_until IS NULL OR retry_claimed_until <= clock_timestamp())
          AND (NOT $7::boolean OR ${RETRY_DUE})
        RETURNING clock_timestamp()::text AS started`,
      [...this.dueParameters(), streamId, token, ms / 1000, onlyIfDue],
    );
    const started = returnedRows<{ started: string }>(claimed)[0]?.started;
    if (!started) return undefined;
    const where = 'WHERE projection = $1 AND stream_id = $2 AND retry_claimed_by = $3';
    return {
      token,
      started,
      ms,
      renew: async () =>
        affectedRows(
          await this.query<unknown[]>(
            `UPDATE parked_streams SET retry_claimed_until = clock_timestamp() + make_interval(secs => $4::float8)
              ${where} RETURNING stream_id`,
            [this.group, streamId, token, ms / 1000],
          ),
        ) > 0,
      release: async () => {
        await this.query(
          `UPDATE parked_streams SET retry_claimed_by = NULL, retry_claimed_until = NULL ${where}`,
          [this.group, streamId, token],
        );
      },
    };
  }

  /** $1 group, $2 first automatic retry (s, 0 = off), $3 its longest delay (s): the parameters of RETRY_DUE. */
  private dueParameters(): [string, number, number] {
    return [this.group, ...dueSettings(this.deps.settings)];
  }

  private async refreshParked(): Promise<void> {
    const rows: ParkedKeyRow[] = await this.query(
      `SELECT ${PARKED_KEY} FROM parked_streams WHERE projection = $1`,
      [this.group],
    );
    this.replaceParked(rows);
    // A poll whose read began before this reload (a rebalance's) must not apply its older rows over these: what is
    // loaded here is kept by that poll as what this member parked meanwhile is.
    for (const row of rows) this.parkedSinceRead?.add(row.stream_id);
  }

  /** Called inside the queue only, so a stream parked by a live delivery is never dropped by a stale read. */
  private replaceParked(rows: readonly ParkedKeyRow[]): void {
    this.parked.clear();
    for (const row of rows) this.parked.set(row.stream_id, row.source);
    this.countParked();
  }
  private countParked(): void {
    this.health.parkedStreams = this.parked.size;
  }

  private async databaseAnswers(): Promise<boolean> {
    try {
      await this.query('SELECT 1', []);
      return true;
    } catch {
      return false;
    }
  }

  private query<T = unknown>(sql: string, parameters: unknown[]): Promise<T> {
    const dataSource = this.deps.dataSource;
    if (!dataSource) throw new Error(`consumer ${this.group}: parking needs the database`);
    return dataSource.query(sql, parameters) as Promise<T>;
  }
}

/** parkedBefore's answer for a message without a key while a key of its stream is parked. */
const HELD = Symbol('held');

/**
 * A message the consumer cannot attribute to an isolation key while a key of its stream is parked: it may belong
 * to that key, so it (and its stream after it) waits until the stream has no parked key. Retried, never parked;
 * the group shows as stalled while it lasts (the supervised bus never reorders a key it cannot tell apart).
 */
class UnattributedMessageWaits extends Error {
  readonly retryable = true;

  constructor(group: string, message: BusMessage) {
    super(
      `consumer ${group}: message ${message.id} (${message.type}) of ${message.key} names no isolation key and a ` +
        'key of its stream is parked: it waits until that key is released',
    );
    this.name = 'UnattributedMessageWaits';
  }
}

/**
 * Failures never parked, only retried: our database's connection is gone, another dependency is down (a chain
 * node, a gRPC service), or the consumer asked for a bounded wait. None is the message's fault, and a parked one
 * would wait for an automatic retry long after the cause passed; the group shows as stalled while it lasts.
 */
function neverParked(error: unknown): boolean {
  return isConnectionLoss(error) || isDependencyOutage(error) || isDeclaredRetryable(error);
}

/** Rows an UPDATE/DELETE ... RETURNING answered (TypeORM returns [rows, count] for them on Postgres). */
function returnedRows<T>(result: unknown[]): T[] {
  return (Array.isArray(result[0]) ? result[0] : result) as T[];
}

function affectedRows(result: unknown[]): number {
  return returnedRows(result).length;
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
