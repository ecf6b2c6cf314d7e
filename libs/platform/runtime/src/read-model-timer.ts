import { type Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';

/** A row due by time, as a read model lists it: (due_at, id) orders the queue and is the tick's cursor. */
export interface DueRow {
  id: string;
  dueAt: Date;
}

/**
 * A durable timer whose queue is a read model: rows that fell due by the injected clock (a partial index keeps
 * that cheap). Nothing lives in memory, so a restart loses nothing: the first tick after start fires whatever fell
 * due while the service was down.
 *
 * `fire` goes through the aggregate, which decides again from its stream, so a row changed meanwhile (or fired by
 * another replica, which loses the expected-revision check) appends nothing. The tick walks past such a row with a
 * cursor rather than asking for it again: a row that stays due but is held off (a full deposit still confirming,
 * a projection a step behind) would otherwise make the tick spin.
 */
export abstract class ReadModelTimer<Row extends DueRow> implements OnApplicationBootstrap, OnModuleDestroy {
  protected abstract readonly logger: Logger;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  protected constructor(
    private readonly pollIntervalMs: () => number,
    private readonly batch = 100,
  ) {}

  /** Rows due at `now`, in (dueAt, id) order, strictly after `after` when given. */
  protected abstract due(now: Date, limit: number, after?: DueRow): Promise<Row[]>;
  /** Fires one row; true when it changed something. */
  protected abstract fire(row: Row): Promise<boolean>;
  protected abstract now(): Date;

  onApplicationBootstrap(): void {
    this.schedule(0);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick()
        .then(() => undefined)
        .catch((error: unknown) =>
          this.logger.error({ msg: 'timer tick failed, will retry', error: String(error) }),
        )
        .finally(() => {
          this.running = undefined;
          this.schedule(this.pollIntervalMs());
        });
    }, delayMs);
    this.timer.unref();
  }

  /** Fires every row due now; returns how many changed something. */
  async tick(): Promise<number> {
    const now = this.now();
    let fired = 0;
    let after: DueRow | undefined;
    for (;;) {
      const due = await this.due(now, this.batch, after);
      for (const row of due) {
        if (this.stopped) return fired;
        if (await this.fire(row)) fired += 1;
        after = { id: row.id, dueAt: row.dueAt };
      }
      if (due.length < this.batch) return fired;
    }
  }
}
