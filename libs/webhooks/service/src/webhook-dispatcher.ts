import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import { CLOCK } from '@stablepay/aggregate';
import { type Clock, DomainError } from '@stablepay/util';
import {
  abandonIfPastWindow,
  afterAttempt,
  applySelection,
  type AttemptOutcome,
  dueTrigger,
  failureCode,
  isDeliverySuccess,
  isEventTypeSelected,
  postponeAttempt,
} from '@stablepay/webhooks-domain';
import { DISPATCH_OPTIONS, type DispatchOptions } from './dispatch.config';
import { WebhookHttpSender } from './http/webhook-http-sender';
import { type MerchantEndpoint, MerchantEndpoints } from './merchant-endpoints';
import { WEBHOOK_SOURCES } from './tokens';
import type { WebhookSourceRegistry } from './sources';
import { prepareRecordedDelivery } from './webhook-deliverer';
import {
  type ClaimedEventRow,
  recordedEventOf,
  sanitizeExcerpt,
  stateOf,
  WebhookEventStore,
  type WorkResult,
} from './webhook-event.store';

/** Poll interval when no source is registered. */
const IDLE_POLL_INTERVAL_MS = 60_000;

/** Claimed events held per slot (running + waiting): claims are larger and overlap with sending. */
const PREFETCH_FACTOR = 4;

/** While deliveries are in flight, wake-ups within this window share one claim. */
const CLAIM_COALESCE_MS = 2;

/**
 * Claims in flight at once: the next claim is sent while one is still on its way back, so the claim's round trip
 * does not leave slots idle; draining a backlog was bounded by that round trip.
 */
const CLAIMS_IN_FLIGHT = 2;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Group commit of finished work: results that finish while a write runs go together in the next write, so the
 * database sees one statement per batch rather than one per delivery.
 */
class ResultWriter {
  private queue: Array<{ result: WorkResult; resolve: () => void; reject: (error: unknown) => void }> = [];
  private flushing = false;

  constructor(
    private readonly store: WebhookEventStore,
    private readonly logger: Logger,
  ) {}

  write(result: WorkResult): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ result, resolve, reject });
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, 500);
        let error: unknown;
        for (let attempt = 0; attempt < 6; attempt++) {
          try {
            await this.store.writeResults(batch.map((b) => b.result));
            error = undefined;
            break;
          } catch (e) {
            error = e;
            this.logger.warn({
              msg: 'writing delivery results failed; retrying',
              count: batch.length,
              error: String(e),
            });
            await sleep(Math.min(2000, 50 * 2 ** attempt));
          }
        }
        // Unwritten results are not lost deliveries: the leases expire and the events are attempted again.
        for (const b of batch) {
          if (error === undefined) b.resolve();
          else b.reject(error);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}

/**
 * The delivery loop (SPEC Delivery rules 1-2): claims due events from the durable schedule in Postgres, delivers
 * them with bounded concurrency (globally and per merchant, claimed fairly across merchants), and writes each
 * result back with the next state from the pure delivery rules. Time comes from the injected clock, so tests walk
 * the 5/15/30/60/60-minute schedule without sleeping; the poll interval is real time.
 */
interface Claimed {
  readonly row: ClaimedEventRow;
  readonly endpoint: MerchantEndpoint | undefined;
  readonly leaseToken: string;
}

@Injectable()
export class WebhookDispatcher implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('webhook-dispatcher');
  /** Claims running now; `reserved` is the room they asked for, not yet in the ready queues. */
  private readonly claims = new Set<Promise<unknown>>();
  private reserved = 0;
  /** A tick found every claim lane busy: look again when one ends (what it wanted may be newer than their reads). */
  private claimAgain = false;
  private readonly writer: ResultWriter;
  /** Claimed here and not yet written back (ready, sending or being written): never claimed again by this process. */
  private readonly held = new Set<string>();
  /** Attempts running or being written. */
  private readonly tasks = new Map<string, Promise<void>>();
  /** Claimed, waiting for a slot, per merchant (a bounded prefetch: claims overlap with sending). */
  private readonly ready = new Map<string, Claimed[]>();
  private readyCount = 0;
  /** Attempts running now, per merchant and in total: the concurrency bounds. */
  private readonly sendingBy = new Map<string, number>();
  private sending = 0;
  private timer: NodeJS.Timeout | undefined;
  private tickQueued = false;
  private stopping = false;
  private started = false;
  private pollIntervalMs: number;

  constructor(
    @Inject(WebhookEventStore) private readonly store: WebhookEventStore,
    @Inject(MerchantEndpoints) private readonly endpoints: MerchantEndpoints,
    @Inject(WebhookHttpSender) private readonly sender: WebhookHttpSender,
    @Inject(WEBHOOK_SOURCES) private readonly sources: WebhookSourceRegistry,
    @Inject(DISPATCH_OPTIONS) private readonly options: DispatchOptions,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(DataSource) private readonly dataSource: DataSource,
  ) {
    this.writer = new ResultWriter(store, this.logger);
    this.pollIntervalMs = options.pollIntervalMs;
  }

  /**
   * Starts the poll loop. With no source registered no new event can appear, so it only looks once a minute (for
   * retries of events an earlier deployment recorded) instead of every poll interval.
   */
  onApplicationBootstrap(): void {
    const idle = this.sources.topics().length === 0;
    if (idle) {
      this.pollIntervalMs = Math.max(this.options.pollIntervalMs, IDLE_POLL_INTERVAL_MS);
      this.logger.log({ msg: 'no webhook sources registered; polling once a minute' });
    }
    this.started = true;
    this.schedule(idle ? this.pollIntervalMs : 0);
  }

  /**
   * Stops claiming, gives back the leases of claimed events not started yet, lets the attempts in flight finish
   * (each bounded by the response deadline) and writes them. Bounded: if the database stops answering, shutdown
   * goes on and the leases expire instead.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    const bound = this.options.policy.responseDeadlineMs + this.options.readModelWaitMs + 5_000;
    let timer: NodeJS.Timeout | undefined;
    const settle = async () => {
      // Claims still on their way back put their rows in the ready queues first, so their leases are given back too.
      await Promise.allSettled([...this.claims]);
      const unstarted = [...this.ready.values()].flat();
      this.ready.clear();
      this.readyCount = 0;
      for (const c of unstarted) this.held.delete(c.row.id);
      await Promise.allSettled([
        this.store.releaseLeases(
          unstarted.map((c) => c.row.id),
          unstarted.map((c) => c.leaseToken),
        ),
        ...this.tasks.values(),
      ]);
    };
    await Promise.race([settle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, bound)))]);
    clearTimeout(timer);
  }

  /**
   * Look for due work soon (new events recorded, an attempt finished). Coalesced: at once when idle; while
   * deliveries are in flight, a couple of milliseconds later, so that the slots freed meanwhile are refilled by
   * one claim instead of one claim per finished attempt.
   */
  wake(): void {
    if (this.stopping || !this.started || this.tickQueued) return;
    this.tickQueued = true;
    const run = () => {
      this.tickQueued = false;
      void this.tick();
    };
    if (this.sending === 0) setImmediate(run);
    else setTimeout(run, CLAIM_COALESCE_MS);
  }

  /** Delivers everything due at the clock's current time and waits until nothing is due or in flight (tests, tools). */
  async drain(): Promise<void> {
    for (let failures = 0; ;) {
      const claimed = await this.tick();
      if (claimed < 0) {
        if (++failures > 20) throw new Error('claiming due webhook events keeps failing');
        await sleep(50);
        continue;
      }
      if (claimed === 0 && this.held.size === 0 && this.claims.size === 0) return;
      await Promise.allSettled([...this.tasks.values(), ...this.claims]);
    }
  }

  /** Events claimed by this process and not yet written back. */
  get inFlightCount(): number {
    return this.held.size;
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      void this.tick().finally(() => this.schedule(this.pollIntervalMs));
    }, delayMs);
    this.timer.unref();
  }

  /** Claims due work and starts what the slots allow; the number claimed, or -1 when the claim failed. */
  private tick(): Promise<number> {
    if (this.stopping) return Promise.resolve(0);
    return this.claim()
      .catch((error: unknown) => {
        this.logger.error({ msg: 'claiming due webhook events failed; will retry', error: String(error) });
        return -1;
      })
      .finally(() => this.pump());
  }

  /**
   * Claims into the ready queues while they have room: this process holds at most PREFETCH_FACTOR times its
   * concurrency (running + waiting + asked for by claims in flight) and, per merchant, PREFETCH_FACTOR times that
   * merchant's slots as each claim sees it (two claims in flight may each grant a merchant its share: the prefetch
   * bound per merchant is then twice that, never its sending slots), so claims are large and overlap with sending,
   * and the claim's round-robin ranking decides who goes first. Up to CLAIMS_IN_FLIGHT claims run at once; while
   * one runs, another is only sent for at least the concurrency's worth of room: small claims cost the database
   * about as much as large ones, and under CPU contention more of them slowed the drain.
   */
  private async claim(): Promise<number> {
    let claimedTotal = 0;
    const perMerchantHeld = this.options.perMerchantConcurrency * PREFETCH_FACTOR;
    for (;;) {
      if (this.stopping) return claimedTotal;
      const room =
        this.options.concurrency * PREFETCH_FACTOR - this.sending - this.readyCount - this.reserved;
      if (room <= 0) return claimedTotal;
      if (this.claims.size >= CLAIMS_IN_FLIGHT || (this.claims.size > 0 && room < this.options.concurrency)) {
        this.claimAgain = true;
        return claimedTotal;
      }
      const busy = new Map<string, number>(this.sendingBy);
      for (const [merchantId, queue] of this.ready)
        busy.set(merchantId, (busy.get(merchantId) ?? 0) + queue.length);
      const now = this.clock.now();
      const leaseToken = randomUUID();
      const claimed = (async () => {
        const rows = await this.store.claimDue({
          now,
          limit: room,
          perMerchantLimit: perMerchantHeld,
          busy,
          inFlight: [...this.held],
          leaseToken,
          leaseExpiresAt: new Date(now.getTime() + this.options.leaseMs),
        });
        const endpoints =
          rows.length === 0
            ? new Map()
            : await this.endpoints.cachedForMerchants(rows.map((r) => r.merchant_id));
        return { rows, endpoints };
      })();
      this.claims.add(claimed);
      this.reserved += room;
      let result: Awaited<typeof claimed>;
      try {
        result = await claimed;
      } finally {
        this.claims.delete(claimed);
        this.reserved -= room;
        if (this.claimAgain && !this.stopping) {
          this.claimAgain = false;
          this.wake();
        }
      }
      const { rows, endpoints } = result;
      for (const row of rows) {
        // Only a lease that expired by the clock while a concurrent claim was on its way back can be claimed
        // twice here; the newer lease is not ours to track, so the event is delivered once its lease expires.
        if (this.held.has(row.id)) continue;
        this.held.add(row.id);
        const queue = this.ready.get(row.merchant_id) ?? [];
        queue.push({ row, endpoint: endpoints.get(row.merchant_id), leaseToken });
        this.ready.set(row.merchant_id, queue);
        this.readyCount++;
      }
      claimedTotal += rows.length;
      this.pump();
      if (rows.length < room) return claimedTotal;
    }
  }

  /** Starts waiting events while slots are free, one merchant after another (round-robin), within each one's slots. */
  private pump(): void {
    if (this.stopping) return;
    let progress = true;
    while (progress && this.readyCount > 0 && this.sending < this.options.concurrency) {
      progress = false;
      for (const merchantId of [...this.ready.keys()]) {
        if (this.sending >= this.options.concurrency) break;
        const queue = this.ready.get(merchantId);
        if (!queue) continue;
        if ((this.sendingBy.get(merchantId) ?? 0) >= this.options.perMerchantConcurrency) continue;
        const next = queue.shift();
        if (!next) continue;
        this.readyCount--;
        // Move the merchant to the back: the next pass starts with the others.
        this.ready.delete(merchantId);
        if (queue.length > 0) this.ready.set(merchantId, queue);
        this.start(next);
        progress = true;
      }
    }
  }

  /**
   * One attempt: its slot (global and per merchant) is held while the attempt runs and freed as soon as it ends,
   * so the next attempt starts while this result is still being written; the event stays held (never claimed
   * again here) until its result is stored.
   */
  private start({ row, endpoint, leaseToken }: Claimed): void {
    this.sending++;
    this.sendingBy.set(row.merchant_id, (this.sendingBy.get(row.merchant_id) ?? 0) + 1);
    const release = () => {
      this.sending--;
      const n = (this.sendingBy.get(row.merchant_id) ?? 1) - 1;
      if (n <= 0) this.sendingBy.delete(row.merchant_id);
      else this.sendingBy.set(row.merchant_id, n);
      this.pump();
      this.wake();
    };
    const task = this.work(row, endpoint, leaseToken)
      .then(
        (result) => {
          release();
          return this.writer.write(result);
        },
        (error: unknown) => {
          release();
          throw error;
        },
      )
      .catch((error: unknown) => {
        this.logger.error({
          msg: 'webhook delivery task failed; the lease will expire and the event be retried',
          eventId: row.id,
          error: String(error),
        });
      })
      .finally(() => {
        this.tasks.delete(row.id);
        this.held.delete(row.id);
      });
    this.tasks.set(row.id, task);
  }

  private async work(
    row: ClaimedEventRow,
    endpoint: MerchantEndpoint | undefined,
    leaseToken: string,
  ): Promise<WorkResult> {
    const policy = this.options.policy;
    const now = this.clock.now();
    const base = {
      eventId: row.id,
      merchantId: row.merchant_id,
      leaseToken,
      claimedRedeliveryRequestedAt: row.redelivery_requested_at,
      readModelConfirmed: row.read_model_confirmed,
    };
    const stored = abandonIfPastWindow(stateOf(row), row.created_at, now, policy) ?? stateOf(row);
    // SPEC Delivery rule 5, applied by the recorder and again with the settings of the first pick-up (a URL removed since).
    const state = applySelection(stored, {
      hasEndpoint: endpoint?.url !== null && endpoint?.url !== undefined,
      typeSelected: isEventTypeSelected(endpoint?.eventTypes ?? null, row.type),
    });
    const trigger = dueTrigger(state, now);
    if (trigger === null) return { ...base, state };

    // SPEC read-your-writes: not before the read model the merchant queries next holds the record.
    if (!row.read_model_confirmed && !(await this.readable(row))) {
      this.logger.warn({
        msg: 'read model lags; webhook attempt postponed',
        eventId: row.id,
        source: row.source,
      });
      return {
        ...base,
        state: postponeAttempt(state, trigger, new Date(now.getTime() + this.options.readModelRetryMs)),
      };
    }

    const { outcome, url } = await this.attempt(row, endpoint, now);
    const next = afterAttempt(
      state,
      { trigger, outcome, at: now, eventId: row.id, createdAt: row.created_at },
      policy,
    );
    if (!isDeliverySuccess(outcome)) {
      this.logger.warn({
        msg: 'webhook attempt failed',
        eventId: row.id,
        merchantId: row.merchant_id,
        attempt: next.attemptCount,
        status: outcome.kind === 'response' ? outcome.status : null,
        error: failureCode(outcome),
        deliveryStatus: next.status,
        nextAttemptAt: next.nextAttemptAt?.toISOString() ?? null,
      });
    }
    return {
      ...base,
      readModelConfirmed: true,
      state: next,
      attempt: {
        number: next.attemptCount,
        trigger,
        at: now,
        url,
        responseStatus: outcome.kind === 'response' ? outcome.status : null,
        error: failureCode(outcome),
        durationMs: 'durationMs' in outcome ? outcome.durationMs : null,
        responseExcerpt:
          outcome.kind === 'response'
            ? sanitizeExcerpt(outcome.bodyExcerpt, this.options.responseExcerptBytes)
            : null,
      },
    };
  }

  private async attempt(
    row: ClaimedEventRow,
    endpoint: MerchantEndpoint | undefined,
    now: Date,
  ): Promise<{ outcome: AttemptOutcome; url: string | null }> {
    const url = endpoint?.url ?? null;
    if (!endpoint || url === null)
      return {
        outcome: { kind: 'refused', code: 'no_webhook_url', detail: 'no webhook URL is configured' },
        url,
      };
    let secrets: Awaited<ReturnType<MerchantEndpoints['activeSecrets']>>;
    try {
      secrets = await this.endpoints.activeSecrets(endpoint);
    } catch (error) {
      // The operator's keys no longer open the secret: a failed attempt the merchant sees in the event's attempts
      // (and retried on the schedule), not an error that leaves the event leased.
      if (!(error instanceof DomainError && error.code === 'webhook_secret_unreadable')) throw error;
      return { outcome: { kind: 'refused', code: 'webhook_secret_unreadable', detail: error.message }, url };
    }
    if (!secrets)
      return {
        outcome: { kind: 'refused', code: 'no_webhook_secret', detail: 'no webhook secret is issued' },
        url,
      };
    const prepared = prepareRecordedDelivery(
      { id: row.id, type: row.type, createdAt: row.created_at },
      row.data_json,
      secrets,
      now,
    );
    const outcome = await this.sender.send({
      url,
      body: prepared.body,
      headers: prepared.headers,
      timeoutMs: this.options.policy.responseDeadlineMs,
    });
    return { outcome, url };
  }

  /** Polls the source's read-model check (real time, growing pauses) up to `readModelWaitMs`. */
  private async readable(row: ClaimedEventRow): Promise<boolean> {
    const source = this.sources.named(row.source);
    if (!source?.isReadable) return true;
    const event = recordedEventOf(row);
    const deadline = performance.now() + this.options.readModelWaitMs;
    for (let pause = 5; ; pause = Math.min(pause * 2, 200)) {
      try {
        if (await source.isReadable(event, this.dataSource)) return true;
      } catch (error) {
        this.logger.warn({
          msg: 'read-model check failed',
          eventId: row.id,
          source: row.source,
          error: String(error),
        });
      }
      if (performance.now() + pause > deadline) return false;
      await sleep(pause);
    }
  }
}
