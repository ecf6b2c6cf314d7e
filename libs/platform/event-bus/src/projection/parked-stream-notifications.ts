import type { Pool } from 'pg';
import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { ChannelListener, connectForListening, sharesOneSession } from '@stablepay/node-util';

/** The channel `parked_streams` changes are notified on; the payload is the row's projection (or consumer group). */
export const PARKED_STREAMS_CHANNEL = 'stablepay_parked_streams';

/**
 * Every change that matters to a runner's poll notifies, whoever makes it (a runner, a supervised consumer, the
 * admin route or CLI, a process of the previous version): a stream parked (INSERT), released (DELETE), or its retry
 * asked for or put off (`retry_requested_at`). Delivered at commit. Identical notifications of one transaction are
 * folded into one by PostgreSQL, so a batch parking many streams of a projection sends one.
 */
export class NotifyParkedStreamChanges1795536000000 implements MigrationInterface {
  name = 'NotifyParkedStreamChanges1795536000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE OR REPLACE FUNCTION stablepay_parked_streams_notify() RETURNS trigger
      LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'DELETE' THEN
          PERFORM pg_notify('${PARKED_STREAMS_CHANNEL}', OLD.projection);
        ELSE
          PERFORM pg_notify('${PARKED_STREAMS_CHANNEL}', NEW.projection);
        END IF;
        RETURN NULL;
      END $$`);
    await queryRunner.query('DROP TRIGGER IF EXISTS parked_streams_notify ON parked_streams');
    await queryRunner.query(`CREATE TRIGGER parked_streams_notify
      AFTER INSERT OR DELETE OR UPDATE OF retry_requested_at ON parked_streams
      FOR EACH ROW EXECUTE FUNCTION stablepay_parked_streams_notify()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TRIGGER IF EXISTS parked_streams_notify ON parked_streams');
    await queryRunner.query('DROP FUNCTION IF EXISTS stablepay_parked_streams_notify()');
  }
}

type Wake = () => void;

/** A DataSource, or what a consumer is given of one: without its driver's pool nothing is listened to. */
type ListenedDataSource = Pick<DataSource, 'query'>;

/**
 * The parked-stream notifications of one database, shared by the projection runners and supervised consumer groups
 * (runners, below) of the process on it: one listening connection while any runner is subscribed, each
 * notification handed to the runners of its projection or group, and every runner woken once after each
 * (re)connection (what was notified meanwhile is lost). Nothing is listened
 * to where the server shares one session between connections (the embedded PGlite server: one process, whose
 * runners count what they park themselves), without a pg pool, or with a pool of one; the runners then poll as before.
 */
export class ParkedStreamNotifications {
  private readonly wakes = new Map<string, Set<Wake>>();
  private listener: ChannelListener | undefined;
  private opening: Promise<void> | undefined;

  private constructor(private readonly dataSource: ListenedDataSource) {}

  private static readonly byDataSource = new WeakMap<ListenedDataSource, ParkedStreamNotifications>();

  static of(dataSource: ListenedDataSource): ParkedStreamNotifications {
    let notifications = ParkedStreamNotifications.byDataSource.get(dataSource);
    if (!notifications) {
      notifications = new ParkedStreamNotifications(dataSource);
      ParkedStreamNotifications.byDataSource.set(dataSource, notifications);
    }
    return notifications;
  }

  /** True while notifications are heard: the runners' polls are then only the safety net. */
  get listening(): boolean {
    return this.listener?.listening ?? false;
  }

  /** `wake` is called for each notification about `projection`; the answer ends the subscription. */
  async subscribe(
    projection: string,
    wake: Wake,
    onError: (error: unknown) => void,
  ): Promise<() => Promise<void>> {
    let wakes = this.wakes.get(projection);
    if (!wakes) this.wakes.set(projection, (wakes = new Set()));
    wakes.add(wake);
    this.opening ??= this.open(onError);
    await this.opening;
    return async () => {
      wakes.delete(wake);
      if (wakes.size === 0) this.wakes.delete(projection);
      if (this.wakes.size > 0) return;
      const listener = this.listener;
      this.listener = undefined;
      this.opening = undefined;
      await listener?.stop();
    };
  }

  private async open(onError: (error: unknown) => void): Promise<void> {
    // TypeORM's PostgresDriver keeps its pg Pool as `master` (no public accessor).
    const pool = (this.dataSource as { driver?: { master?: Pool } }).driver?.master;
    if (!pool || typeof pool.query !== 'function') return;
    // The probe below holds two connections at once: a pool of one would wait for ever (it is polled instead).
    if ((pool as { options?: { max?: number } }).options?.max === 1) return;
    try {
      if (await sharesOneSession(pool)) return;
    } catch (error) {
      // The database is away: the polls serve until a runner subscribes again.
      this.opening = undefined;
      onError(error);
      return;
    }
    if (this.wakes.size === 0) {
      this.opening = undefined;
      return;
    }
    const listener = new ChannelListener(() => connectForListening(pool.options), PARKED_STREAMS_CHANNEL, {
      notified: (projection) => {
        for (const wake of projection === undefined ? [] : (this.wakes.get(projection) ?? [])) wake();
      },
      listening: () => {
        for (const wakes of this.wakes.values()) for (const wake of wakes) wake();
      },
      error: onError,
    });
    this.listener = listener;
    await listener.start();
  }
}
