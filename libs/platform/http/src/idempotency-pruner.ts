import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  Optional,
} from '@nestjs/common';
import { Counter, register } from 'prom-client';
import { DataSource } from 'typeorm';
import { type Clock, envInt, HOUR, MINUTE, systemClock } from '@stablepay/util';
import { IDEMPOTENCY_CLOCK, IDEMPOTENCY_WINDOW_MS, RELEASED_SHIFT } from './idempotency.interceptor';

export interface IdempotencyPruneConfig {
  /** How long a row is kept after its last claim (IDEMPOTENCY_KEY_RETENTION_HOURS). */
  readonly retentionMs: number;
  /** Between two runs. */
  readonly intervalMs: number;
  /** Rows deleted per statement. */
  readonly batch: number;
}

export const IDEMPOTENCY_PRUNE_CONFIG = Symbol('IDEMPOTENCY_PRUNE_CONFIG');

export const DEFAULT_IDEMPOTENCY_PRUNE: IdempotencyPruneConfig = {
  retentionMs: 48 * HOUR,
  intervalMs: 10 * MINUTE,
  batch: 1000,
};

/**
 * The least retention is the 24 hours and one more: a row is needed for its key's 24 hours only (a claim after
 * them starts a new generation whether the row is there or not), and the hour covers the in-flight lease (10
 * minutes) and clock skew between the gateways that write `created_at`.
 */
const MIN_RETENTION_HOURS = IDEMPOTENCY_WINDOW_MS / HOUR + 1;

export function idempotencyPruneConfigFromEnv(
  env: Record<string, string | undefined>,
): IdempotencyPruneConfig {
  const hours = envInt(
    env,
    'IDEMPOTENCY_KEY_RETENTION_HOURS',
    DEFAULT_IDEMPOTENCY_PRUNE.retentionMs / HOUR,
    MIN_RETENTION_HOURS,
    24 * 366 * 10,
  );
  return { ...DEFAULT_IDEMPOTENCY_PRUNE, retentionMs: hours * HOUR };
}

/**
 * One batch: the rows whose last claim is older than $1, at most $2 of them. A live row's `created_at` is its claim
 * time; a released row's is its claim time moved back by RELEASED_SHIFT, so the two are separate ranges of the
 * created_at index (half the shift apart) and neither needs a scan of the table. A released row of 5708bdf
 * (-infinity: its claim time is unknown) is dated first (DATE_UNDATED_SQL). Each batch is its own statement holding
 * row locks only, and SKIP LOCKED passes over a row a claim holds (and the rows another gateway's pruner is
 * deleting): a claim never waits for a whole run, and gateways pruning at once share the work.
 */
const PRUNE_SQL = `WITH gone AS (
    DELETE FROM idempotency_keys WHERE (scope, key) IN (
      SELECT scope, key FROM idempotency_keys
      WHERE (state = 'released' AND created_at > '-infinity'
             AND created_at < $1::timestamptz - interval '${RELEASED_SHIFT}')
         OR (state <> 'released' AND created_at < $1::timestamptz
             AND created_at >= $1::timestamptz - interval '${RELEASED_SHIFT}' / 2)
      LIMIT $2
      FOR UPDATE SKIP LOCKED)
    RETURNING 1)
  SELECT count(*)::int AS n FROM gone`;

/**
 * One batch of released rows written by gateways of 5708bdf (still serving during a rollout after the migration that
 * dated the ones already there, TimeIdempotencyKeyGenerations1795622400500): `created_at` -infinity, their claim
 * time unknown, so the prune's ranges never reach them and nothing else does unless their key is claimed again.
 * Deleting one at once could cut off its retry within its 24 hours (with the row gone the retry starts a new
 * generation: a create whose answer was lost made again), so each is given the time it is first seen ($1, as a
 * released row's: moved back by RELEASED_SHIFT) and is pruned one retention later; its claim was before, so its
 * 24 hours are inside that. Found by the created_at index (-infinity is its lowest value).
 */
const DATE_UNDATED_SQL = `WITH dated AS (
    UPDATE idempotency_keys SET created_at = $1::timestamptz - interval '${RELEASED_SHIFT}'
    WHERE (scope, key) IN (
      SELECT scope, key FROM idempotency_keys
      WHERE created_at = '-infinity' AND state = 'released'
      LIMIT $2
      FOR UPDATE SKIP LOCKED)
    RETURNING 1)
  SELECT count(*)::int AS n FROM dated`;

const pruned =
  (register.getSingleMetric('stablepay_idempotency_keys_pruned_total') as Counter | undefined) ??
  new Counter({
    name: 'stablepay_idempotency_keys_pruned_total',
    help: 'Idempotency-Key rows deleted past their retention (IDEMPOTENCY_KEY_RETENTION_HOURS)',
  });

/**
 * Deletes `idempotency_keys` rows whose last claim is older than the retention. Safe because a key's generation
 * does not depend on its row (TimeIdempotencyKeyGenerations1795622400500): a claim after the 24 hours starts a new
 * generation whether it finds the row or not, and the retention (at least 25 hours) is past every retry that must
 * find it. Every gateway process runs one, every `intervalMs` (the first a full interval after its start); nothing
 * is kept in memory, so a restart loses nothing.
 */
@Injectable()
export class IdempotencyKeyPruner implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('idempotency');
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private stopped = false;

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Optional() @Inject(IDEMPOTENCY_PRUNE_CONFIG) private readonly config = DEFAULT_IDEMPOTENCY_PRUNE,
    @Optional() @Inject(IDEMPOTENCY_CLOCK) private readonly clock: Clock = systemClock,
  ) {}

  onApplicationBootstrap(): void {
    this.schedule();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.prune()
        .catch((error: unknown) =>
          this.logger.warn(`Idempotency-Key pruning failed, will retry: ${String(error)}`),
        )
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, this.config.intervalMs);
    this.timer.unref();
  }

  /**
   * Deletes every row past the retention, a batch per statement; answers how many rows in how many batches (and how
   * many undated rows of 5708bdf it dated, to be deleted one retention later).
   */
  async prune(): Promise<{ rows: number; batches: number; dated: number }> {
    const now = this.clock.now();
    const cutoff = new Date(now.getTime() - this.config.retentionMs);
    const dated = (await this.inBatches(DATE_UNDATED_SQL, now)).rows;
    if (dated > 0)
      this.logger.log(
        `Idempotency-Key released rows without a claim time (a gateway of 5708bdf): ${dated} dated ${now.toISOString()}, pruned one retention later`,
      );
    const { rows, batches } = await this.inBatches(PRUNE_SQL, cutoff, (n) => pruned.inc(n));
    if (rows > 0)
      this.logger.log(`Idempotency-Key rows pruned: ${rows} (claimed before ${cutoff.toISOString()})`);
    return { rows, batches, dated };
  }

  /** Runs a batch statement (answering `n`) until a batch is short. */
  private async inBatches(
    sql: string,
    at: Date,
    counted: (n: number) => void = () => undefined,
  ): Promise<{ rows: number; batches: number }> {
    let rows = 0;
    let batches = 0;
    while (!this.stopped) {
      const [result] = (await this.dataSource.query(sql, [at, this.config.batch])) as Array<{ n: number }>;
      const n = result?.n ?? 0;
      if (n === 0) break;
      rows += n;
      batches += 1;
      counted(n);
      if (n < this.config.batch) break;
    }
    return { rows, batches };
  }
}
