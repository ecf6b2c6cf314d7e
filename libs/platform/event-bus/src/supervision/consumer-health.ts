import { Counter, Gauge, register, type Metric } from 'prom-client';
import type { BusMessage } from '../event-bus.port';
import { isDeclaredRetryable } from './failure-kind';

export interface ConsumerHealthSettings {
  /** Failed handler calls in a row after which the group counts as stalled (/ready fails). Default 3. */
  readonly stalledAfterFailures?: number;
  /**
   * Time with work pending (a handler call running, a failing delivery, a backlog probe unanswered) and no
   * progress, after which the group counts as stalled: a hung handler or catch-up reads that keep failing never
   * fail a handler call, so failures alone would leave the group ready. Default 60 s.
   */
  readonly stalledAfterMs?: number;
  /** How often the group's subscription is asked whether it is caught up (the backlog probe). Default 10 s. */
  readonly probeIntervalMs?: number;
  /** Milliseconds since the epoch; tests inject it. */
  readonly clock?: () => number;
}

export interface ConsumerStatus {
  readonly group: string;
  readonly stalled: boolean;
  /** Why the group is stalled (failing, or no progress with work pending). */
  readonly reason?: string;
  readonly consecutiveFailures: number;
  readonly lastError?: string;
  /** When a handler call last succeeded (or the group started), ISO time. */
  readonly lastProgressAt: string;
  /** Work is waiting: a handler call runs or failed, or the backlog probe has not been answered yet. */
  readonly pending: boolean;
  /** Age of the oldest message not handled yet when work is pending; otherwise the last handled message's lag. */
  readonly lagSeconds: number;
  readonly parkedStreams: number;
  /** The consumer parks what it cannot handle itself (projections): its parked streams are counted there. */
  readonly isolatesItself: boolean;
}

const DEFAULT_STALLED_AFTER_FAILURES = 3;
const DEFAULT_STALLED_AFTER_MS = 60_000;
const DEFAULT_PROBE_INTERVAL_MS = 10_000;

/**
 * One source of deliveries of a group: a topic. On the store-log bus each topic is its own subscription with its
 * own retries, so a failing topic's deliveries interleave with another topic's successes; its failures in a row
 * and its progress are its own (one shared count was reset by the other topic's successes and never showed the
 * failing one as stalled). On Kafka a member handles one partition's batch at a time and retries it in place, so
 * nothing interleaves with a failing delivery there.
 */
class Lane {
  consecutiveFailures = 0;
  lastError: string | undefined;
  failingSince: number | undefined;
  /** recordedAt (ms) of the oldest message of the running or failing delivery. */
  oldestUnhandledAt: number | undefined;

  constructor(public lastProgressAt: number) {}
}

/**
 * The health of one consumer group in this process, fed by the supervised bus around every handler call:
 * failures in a row and time of the last progress PER TOPIC (Lane), and whether work is pending. Pending work is
 * known three ways: a handler call is running, a delivery failed and waits for its retry, or the subscription has
 * not answered a `caughtUp()` probe yet (the catch-up read cannot even reach the handler). Stalled = one topic
 * failing in a row, or no progress on a topic for `stalledAfterMs` since work became pending there (an idle group
 * is never stalled: its probe answers).
 */
export class ConsumerHealth {
  parkedStreams = 0;
  private readonly lanes = new Map<string, Lane>();
  private readonly startedAt: number;
  /** Progress on any topic (the backlog probe cannot tell topics apart). */
  private lastProgressAt: number;
  /** Lag of the last handled message (any topic). */
  private lastLagSeconds = 0;
  private runningSince: number | undefined;
  private runningTopic: string | undefined;
  private probeSince: number | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private readonly stalledAfterFailures: number;
  private readonly stalledAfterMs: number;
  private readonly now: () => number;

  constructor(
    readonly group: string,
    readonly isolatesItself: boolean,
    private readonly settings: ConsumerHealthSettings = {},
  ) {
    this.now = settings.clock ?? Date.now;
    this.stalledAfterFailures = settings.stalledAfterFailures ?? DEFAULT_STALLED_AFTER_FAILURES;
    this.stalledAfterMs = settings.stalledAfterMs ?? DEFAULT_STALLED_AFTER_MS;
    this.startedAt = this.now();
    this.lastProgressAt = this.startedAt;
  }

  /** Probes the backlog every probeIntervalMs with `caughtUp` (one probe at a time); stop with stopProbing. */
  startProbing(caughtUp: () => Promise<void>): void {
    const probe = (): void => {
      if (this.probeSince !== undefined) return;
      const since = this.now();
      this.probeSince = since;
      const answered = (): void => {
        if (this.probeSince === since) this.probeSince = undefined;
      };
      caughtUp().then(answered, answered);
    };
    this.probeTimer = setInterval(probe, this.settings.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS);
    this.probeTimer.unref();
  }

  stopProbing(): void {
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.probeTimer = undefined;
    this.probeSince = undefined;
  }

  began(messages: readonly BusMessage[]): void {
    this.runningSince = this.now();
    const first = messages[0];
    this.runningTopic = first?.topic;
    if (!first) return;
    const lane = this.lane(first.topic);
    lane.oldestUnhandledAt ??= Date.parse(first.recordedAt);
  }

  /** The delivery was handled (applied, parked or set waiting behind a parked one): progress on its topic. */
  succeeded(messages: readonly BusMessage[]): void {
    const now = this.now();
    this.lastProgressAt = now;
    this.runningSince = undefined;
    this.runningTopic = undefined;
    const last = messages[messages.length - 1];
    if (!last) return;
    const lane = this.lane(last.topic);
    lane.consecutiveFailures = 0;
    lane.lastError = undefined;
    lane.lastProgressAt = now;
    lane.failingSince = undefined;
    lane.oldestUnhandledAt = undefined;
    this.lastLagSeconds = Math.max(0, now - Date.parse(last.recordedAt)) / 1000;
  }

  failed(error: unknown, messages: readonly BusMessage[]): void {
    this.runningSince = undefined;
    this.runningTopic = undefined;
    const first = messages[0];
    if (!first) return;
    const lane = this.lane(first.topic);
    lane.failingSince ??= this.now();
    lane.lastError = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    // A bounded wait the consumer asks for on purpose is not a failure; it still shows if it outlasts stalledAfterMs.
    if (!isDeclaredRetryable(error)) lane.consecutiveFailures++;
  }

  private lane(topic: string): Lane {
    let lane = this.lanes.get(topic);
    if (!lane) {
      // A topic seen first now has made no progress since the group started.
      lane = new Lane(this.startedAt);
      this.lanes.set(topic, lane);
    }
    return lane;
  }

  status(): ConsumerStatus {
    const now = this.now();
    const lanes = [...this.lanes.entries()];
    // The worst topic speaks for the group: the most failures in a row, then the longest without progress.
    const failingLanes = lanes.filter(([, l]) => l.failingSince !== undefined);
    const worst = lanes
      .filter(([, l]) => l.consecutiveFailures > 0)
      .sort(([, a], [, b]) => b.consecutiveFailures - a.consecutiveFailures)[0]?.[1];
    let reason: string | undefined;
    if (worst && worst.consecutiveFailures >= this.stalledAfterFailures) {
      reason = `${worst.consecutiveFailures} failures in a row: ${worst.lastError ?? 'failing'}`;
    }
    // Each source of pending work against the progress it waits for: a failing topic against its own.
    const waits: Array<{ since: number; progress: number; what: () => string }> = [];
    if (this.runningSince !== undefined) {
      const since = this.runningSince;
      const running = this.runningTopic !== undefined ? this.lanes.get(this.runningTopic) : undefined;
      waits.push({
        since,
        progress: running?.failingSince !== undefined ? running.lastProgressAt : this.lastProgressAt,
        what: () => `a handler call running for ${Math.round((now - since) / 1000)} s`,
      });
    }
    for (const [topic, lane] of failingLanes) {
      waits.push({
        since: lane.failingSince ?? now,
        progress: lane.lastProgressAt,
        what: () => `a failing delivery on ${topic} (${lane.lastError ?? 'error'})`,
      });
    }
    if (this.probeSince !== undefined) {
      waits.push({
        since: this.probeSince,
        progress: this.lastProgressAt,
        what: () => 'the subscription not reaching its backlog (catch-up reads failing?)',
      });
    }
    const pending = waits.length > 0;
    const pendingSince = waits.reduce((a, w) => Math.min(a, w.since), Infinity);
    const idleWaits = waits.map((w) => ({ ...w, idle: now - Math.max(w.progress, w.since) }));
    // A handler call that hangs also leaves the backlog probe unanswered, and the probe may have begun first: the
    // running call, once stalled itself, is the cause to name.
    const running = this.runningSince !== undefined ? idleWaits[0] : undefined;
    const longest =
      running && running.idle >= this.stalledAfterMs ? running : idleWaits.sort((a, b) => b.idle - a.idle)[0];
    if (reason === undefined && longest && longest.idle >= this.stalledAfterMs) {
      reason = `no progress for ${Math.round(longest.idle / 1000)} s with work pending: ${longest.what()}`;
    }
    let lagSeconds = this.lastLagSeconds;
    for (const [, lane] of lanes)
      if (lane.oldestUnhandledAt !== undefined)
        lagSeconds = Math.max(lagSeconds, (now - lane.oldestUnhandledAt) / 1000);
    if (reason !== undefined && pending) lagSeconds = Math.max(lagSeconds, (now - pendingSince) / 1000);
    const lastError = (worst ?? failingLanes[0]?.[1])?.lastError;
    // A failing topic's last progress, not another topic's success: the gauge must age while it is stuck.
    const lastProgressAt = failingLanes.length
      ? failingLanes.reduce((a, [, l]) => Math.min(a, l.lastProgressAt), Infinity)
      : this.lastProgressAt;
    return {
      group: this.group,
      stalled: reason !== undefined,
      ...(reason !== undefined ? { reason } : {}),
      consecutiveFailures: worst?.consecutiveFailures ?? 0,
      ...(lastError !== undefined ? { lastError } : {}),
      lastProgressAt: new Date(lastProgressAt).toISOString(),
      pending,
      lagSeconds,
      parkedStreams: this.parkedStreams,
      isolatesItself: this.isolatesItself,
    };
  }
}

/** Every consumer group of one bus: for /ready and /metrics. */
export class ConsumerHealthRegistry {
  private readonly groups = new Map<string, ConsumerHealth>();

  constructor() {
    liveRegistries.add(this);
  }

  add(health: ConsumerHealth): void {
    this.groups.set(health.group, health);
  }

  remove(health: ConsumerHealth): void {
    if (this.groups.get(health.group) === health) this.groups.delete(health.group);
  }

  statuses(): ConsumerStatus[] {
    return [...this.groups.values()].map((h) => h.status());
  }

  /** Stalled groups make the process not ready (with which group and why); parked streams only degrade it. */
  readiness(): { readonly stalled: string[]; readonly degraded: string[] } {
    const stalled: string[] = [];
    const degraded: string[] = [];
    for (const status of this.statuses()) {
      if (status.stalled) stalled.push(`${status.group} stalled: ${status.reason ?? 'failing'}`);
      if (status.parkedStreams > 0)
        degraded.push(`${status.group}: ${status.parkedStreams} parked stream(s)`);
    }
    return { stalled, degraded };
  }

  /** The registry's groups leave the metrics (its bus closed). */
  close(): void {
    this.groups.clear();
    liveRegistries.delete(this);
  }
}

/** The registries of the buses open in this process (several Nest applications share one in tests). */
const liveRegistries = new Set<ConsumerHealthRegistry>();

function allStatuses(): ConsumerStatus[] {
  return [...liveRegistries].flatMap((r) => r.statuses());
}

/**
 * The lag of each self-isolating group (a projection) whose oldest unhandled message is older than the lag it
 * last reported: the projection's last-lag gauge grows with it instead of freezing while the projection is stuck.
 */
export function stuckProjectionLags(): Array<{ readonly projection: string; readonly lagSeconds: number }> {
  return allStatuses()
    .filter((s) => s.isolatesItself && s.pending)
    .map((s) => ({ projection: s.group, lagSeconds: s.lagSeconds }));
}

function metric<M extends Metric>(name: string, create: () => M): M {
  return (register.getSingleMetric(name) as M | undefined) ?? create();
}

/** A gauge per group, computed from the live registries at each scrape. */
function statusGauge(name: string, help: string, value: (s: ConsumerStatus) => number): Gauge {
  return metric(
    name,
    () =>
      new Gauge({
        name,
        help,
        labelNames: ['group'],
        collect() {
          this.reset();
          for (const status of allStatuses()) this.set({ group: status.group }, value(status));
        },
      }),
  );
}

/** Prometheus metrics of every bus consumer group (prom-client's default registry, served by `/metrics`). */
export const consumerMetrics = {
  stalled: statusGauge(
    'stablepay_consumer_stalled',
    'Whether a consumer group is stalled (failing in a row, or no progress with work pending): 1 or 0.',
    (s) => (s.stalled ? 1 : 0),
  ),
  lastProgress: statusGauge(
    'stablepay_consumer_last_progress_timestamp_seconds',
    'When a consumer group last handled a delivery (or started), seconds since the epoch.',
    (s) => Date.parse(s.lastProgressAt) / 1000,
  ),
  failures: statusGauge(
    'stablepay_consumer_consecutive_failures',
    'Failed handler calls in a row of a consumer group.',
    (s) => s.consecutiveFailures,
  ),
  lag: statusGauge(
    'stablepay_consumer_lag_seconds',
    'Age of the oldest message a consumer group has not handled yet while work is pending (grows while it is stuck); otherwise the lag of the last handled message.',
    (s) => s.lagSeconds,
  ),
  parked: statusGauge(
    'stablepay_consumer_parked_streams',
    "Streams a consumer group parked on a message that kept failing (they wait for a retry; other streams go on). The group's total in the shared table, reported alike by each member: aggregate with max by (group), not sum.",
    (s) => s.parkedStreams,
  ),
  messages: metric(
    'stablepay_consumer_messages_total',
    () =>
      new Counter({
        name: 'stablepay_consumer_messages_total',
        help: 'Messages a supervised consumer group set aside, by outcome (parked, waiting behind a parked one, released by a retry).',
        labelNames: ['group', 'outcome'],
      }),
  ),
};
