import type {
  ReadAllOptions,
  RecordedEvent,
  StoreSubscription,
  SubscribeToAllOptions,
} from './event-store.port';
import {
  backoffDelay,
  DEFAULT_BACKOFF,
  InterruptibleSleep,
  type BackoffSettings,
} from './interruptible-sleep';

/** Where a durable subscription keeps its position. Adapters store it next to their events. */
export interface CheckpointStore {
  /** The last position handled under this id; 0n for a new subscription. */
  load(subscriptionId: string): Promise<bigint>;
  save(subscriptionId: string, position: bigint): Promise<void>;
}

/**
 * The reads a catch-up subscription needs. Every EventStore provides readAll/headPosition; a store whose log
 * order is not the numeric order of positions (PostgreSQL: transaction id, then position) also provides the
 * horizon pair below, which the subscription then uses to know when it has caught up.
 */
export interface CatchUpSource {
  readAll(options: ReadAllOptions): Promise<RecordedEvent[]>;
  headPosition(): Promise<bigint>;
  /**
   * Optional, as a pair: reads like readAll and, when the read reached the end of what is readable, returns its
   * horizon: every event committed before a `watermark()` call that returned a value <= horizon is among the
   * events read so far. Without them the subscription uses headPosition as both.
   */
  readCatchUpBatch?(options: ReadAllOptions): Promise<CatchUpBatch>;
  watermark?(): Promise<bigint>;
}

export interface CatchUpBatch {
  readonly events: RecordedEvent[];
  /** Present when the batch was short: the subscription has seen everything up to this mark. */
  readonly horizon?: bigint;
}

export interface CatchUpSettings {
  /** Pause between polls once caught up (an in-process append wakes the poller earlier). */
  readonly pollIntervalMs?: number;
  /** Events read per query; also the largest batch given to `handleBatch`. */
  readonly batchSize?: number;
  /** Back-off between retries of a failing handler or a failing read. */
  readonly retry?: BackoffSettings;
  /**
   * Registers a callback fired when new events may exist; returns its unregistration. The store may pass the
   * mark (comparable with a batch's horizon) its append becomes readable at: a read that finds the horizon
   * still below it polls again almost at once instead of after a full poll interval.
   */
  readonly onAppend?: (wake: (mark?: bigint) => void) => () => void;
  /**
   * Least time between two checkpoint writes while events flow (default 100 ms): a crash redelivers at most
   * that much more (delivery is at-least-once anyway), and a busy subscription does not pay one synchronous
   * commit per batch. The checkpoint is always written at stop and after a failing handler.
   */
  readonly checkpointIntervalMs?: number;
  /** Reports read or checkpoint-write failures (the subscription keeps retrying them). */
  readonly onInfrastructureError?: (error: unknown, subscriptionId: string) => void;
}

const DEFAULT_POLL_INTERVAL_MS = 50;
/**
 * First re-poll delay while an append this process made is known to be committed but not readable yet (an older
 * transaction still holds the horizon back); it doubles on each fruitless re-poll up to the poll interval. The
 * holder is usually another append of this process, whose completion wakes the subscription anyway, so polling
 * every 2 ms for as long as appends overlap (which under load is always) only burns reads.
 */
const PENDING_REPOLL_MS = 2;
const DEFAULT_BATCH_SIZE = 200;
const DEFAULT_CHECKPOINT_INTERVAL_MS = 100;

/**
 * Starts a catch-up subscription: reads the global log after the stored checkpoint, hands each event to the
 * handler in order, retries a failing handler with back-off (never skipping), and stores the checkpoint after
 * each batch, after a failure, and at stop. Delivery is at-least-once: after a crash the events handled since
 * the last stored checkpoint are delivered again.
 *
 * Adapter-independent: it relies on the store's promise that what a read returns is a prefix of the log in the
 * store's order (an event that becomes readable later sorts after everything already returned), so the
 * position of the last handled event is a safe cursor and checkpoint.
 */
export async function startCatchUpSubscription(
  source: CatchUpSource,
  checkpoints: CheckpointStore,
  options: SubscribeToAllOptions,
  settings: CatchUpSettings = {},
): Promise<StoreSubscription> {
  const start = await checkpoints.load(options.subscriptionId);
  const subscription = new CatchUpSubscription(source, checkpoints, options, settings, start);
  subscription.start();
  return subscription;
}

/** The catch-up reads of a store whose log order is the numeric order of positions (in-memory, EventStoreDB). */
async function readByPosition(source: CatchUpSource, options: ReadAllOptions): Promise<CatchUpBatch> {
  // Head first, then the batch: every event at or below `head` is visible to the later read, so a short batch
  // proves the subscription has seen everything up to `head`, including other categories' events.
  const head = await source.headPosition();
  const events = await source.readAll(options);
  return events.length < (options.maxCount ?? Infinity) ? { events, horizon: head } : { events };
}

interface PendingRead {
  /** The cursor the read was sent with. */
  readonly after: bigint;
  readonly batch: Promise<CatchUpBatch>;
}

interface CaughtUpWaiter {
  readonly target: bigint;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

class CatchUpSubscription implements StoreSubscription {
  /** The last handled event's position: the read cursor and the checkpoint. */
  private position: bigint;
  /** Every event committed before a watermark <= this has been handled (or is not ours). */
  private horizon = -1n;
  /** The newest readable-at mark an in-process append announced. */
  private pendingMark = -1n;
  private savedPosition: bigint;
  private savedAt = 0;
  /** Fruitless re-polls in a row while pending (see PENDING_REPOLL_MS). */
  private pendingPolls = 0;
  /** The checkpoint write in flight, if any (see persist). */
  private saving: Promise<void> | undefined;
  private stopped = false;
  private loop: Promise<void> = Promise.resolve();
  private readonly pollSleep = new InterruptibleSleep();
  private readonly retrySleep = new InterruptibleSleep();
  private readonly waiters: CaughtUpWaiter[] = [];
  private readonly unregisterWake: () => void;
  private readonly pollIntervalMs: number;
  private readonly batchSize: number;
  private readonly retry: BackoffSettings;

  constructor(
    private readonly source: CatchUpSource,
    private readonly checkpoints: CheckpointStore,
    private readonly options: SubscribeToAllOptions,
    private readonly settings: CatchUpSettings,
    start: bigint,
  ) {
    this.position = start;
    this.savedPosition = start;
    this.pollIntervalMs = settings.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.batchSize = settings.batchSize ?? DEFAULT_BATCH_SIZE;
    this.retry = settings.retry ?? DEFAULT_BACKOFF;
    this.unregisterWake =
      settings.onAppend?.((mark) => {
        if (mark !== undefined && mark > this.pendingMark) this.pendingMark = mark;
        this.pollSleep.wake();
      }) ?? ((): void => undefined);
  }

  start(): void {
    this.loop = this.run();
  }

  async caughtUp(): Promise<void> {
    if (this.stopped) throw new Error(`subscription ${this.options.subscriptionId} is stopped`);
    const target = this.source.watermark ? await this.source.watermark() : await this.source.headPosition();
    if (this.horizon >= target) return;
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ target, resolve, reject });
      this.pollSleep.wake();
    });
  }

  async stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.unregisterWake();
      this.pollSleep.wake();
      this.retrySleep.wake();
    }
    await this.loop;
  }

  /** Sends the read of the batch after `after`; the promise is marked handled (whoever awaits it still sees a failure). */
  private startRead(after: bigint): PendingRead {
    const read: ReadAllOptions = {
      after,
      maxCount: this.batchSize,
      ...(this.options.categories ? { categories: this.options.categories } : {}),
    };
    const batch = this.source.readCatchUpBatch
      ? this.source.readCatchUpBatch(read)
      : readByPosition(this.source, read);
    batch.catch(() => undefined);
    return { after, batch };
  }

  private async run(): Promise<void> {
    let failedReads = 0;
    /** The next batch's read, sent while the current batch is handled. */
    let next: PendingRead | undefined;
    while (!this.stopped) {
      let more = false;
      let pending = false;
      let progressed = false;
      try {
        const current = next && next.after === this.position ? next : this.startRead(this.position);
        next = undefined;
        const batch: CatchUpBatch = await current.batch;
        more = batch.events.length >= this.batchSize;
        progressed = batch.events.length > 0;
        // After a full batch the next read overlaps the handling of this one instead of following it: a read
        // depends only on its cursor, which after this batch is the batch's last event whatever the handler does
        // (it is retried until it succeeds), so the store's prefix promise holds for it as for any read. (Sent on
        // every announced append as well, it shortened a projection's cycle under a steady stream but added ~0.4
        // catch-up reads per create to the CPU-bound write path: not done.)
        const last = batch.events[batch.events.length - 1];
        if (last && more) next = this.startRead(last.globalPosition);
        if (!(await this.deliver(batch.events))) break;
        if (batch.horizon !== undefined) {
          if (batch.horizon > this.horizon) this.horizon = batch.horizon;
          pending = this.pendingMark >= this.horizon;
        }
        await this.persist(false);
        this.settleWaiters();
        failedReads = 0;
      } catch (error) {
        next = undefined;
        this.settings.onInfrastructureError?.(error, this.options.subscriptionId);
        await this.retrySleep.sleep(backoffDelay(this.retry, failedReads++));
        continue;
      }
      if (!pending || progressed) this.pendingPolls = 0;
      if (!more && !next) {
        await this.pollSleep.sleep(
          pending
            ? Math.min(this.pollIntervalMs, PENDING_REPOLL_MS * 2 ** Math.min(this.pendingPolls++, 16))
            : this.pollIntervalMs,
        );
      }
    }
    await this.finish();
  }

  /** Hands the batch over; false when the subscription was stopped before all of it was handled. */
  private async deliver(batch: readonly RecordedEvent[]): Promise<boolean> {
    const last = batch[batch.length - 1];
    if (!last) return true;
    const handleBatch = this.options.handleBatch;
    if (handleBatch) {
      if (!(await this.withRetry(() => handleBatch(batch), batch[0] ?? last))) return false;
      this.position = last.globalPosition;
      return true;
    }
    for (const event of batch) {
      if (!(await this.withRetry(() => this.options.handler(event), event))) return false;
      this.position = event.globalPosition;
    }
    return true;
  }

  private async withRetry(attempt: () => Promise<void>, event: RecordedEvent): Promise<boolean> {
    for (let failures = 0; !this.stopped; failures++) {
      try {
        await attempt();
        return true;
      } catch (error) {
        this.reportHandlerError(error, event);
        // Keep the progress made before the failing event, so a restart does not redo it.
        await this.persist().catch((e: unknown) =>
          this.settings.onInfrastructureError?.(e, this.options.subscriptionId),
        );
        await this.retrySleep.sleep(backoffDelay(this.retry, failures));
      }
    }
    return false;
  }

  private reportHandlerError(error: unknown, event: RecordedEvent): void {
    try {
      this.options.onError?.(error, event);
    } catch {
      // An error reporter that throws must not turn a retry into a crash of the subscription loop.
    }
  }

  /**
   * Writes the checkpoint. While events flow (`force` false) at most every checkpointIntervalMs and in the
   * background: the next batch does not wait for a synchronous commit (the position written is one already handled,
   * and a failed write is reported and tried again after the next batch). Forced (stop, a failing handler): waits
   * for a write in flight, then writes the current position.
   */
  private async persist(force = true): Promise<void> {
    const interval = this.settings.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS;
    if (!force) {
      if (this.saving || this.position === this.savedPosition) return;
      if (Date.now() - this.savedAt < interval) return;
      const position = this.position;
      this.saving = this.checkpoints
        .save(this.options.subscriptionId, position)
        .then(
          () => {
            this.savedPosition = position;
            this.savedAt = Date.now();
          },
          (error: unknown) => this.settings.onInfrastructureError?.(error, this.options.subscriptionId),
        )
        .finally(() => {
          this.saving = undefined;
        });
      return;
    }
    await this.saving;
    if (this.position === this.savedPosition) return;
    const position = this.position;
    await this.checkpoints.save(this.options.subscriptionId, position);
    this.savedPosition = position;
    this.savedAt = Date.now();
  }

  private settleWaiters(): void {
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const waiter = this.waiters[i];
      if (waiter && waiter.target <= this.horizon) {
        this.waiters.splice(i, 1);
        waiter.resolve();
      }
    }
  }

  private async finish(): Promise<void> {
    try {
      await this.persist();
    } catch (error) {
      this.settings.onInfrastructureError?.(error, this.options.subscriptionId);
    }
    this.settleWaiters();
    const stoppedError = new Error(`subscription ${this.options.subscriptionId} stopped before catching up`);
    for (const waiter of this.waiters.splice(0)) waiter.reject(stoppedError);
  }
}
