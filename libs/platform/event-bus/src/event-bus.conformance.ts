/**
 * The behaviour every EventBus adapter must show, as one Jest suite run by each adapter's spec file.
 *
 * Messages enter the way production makes them: services append to the event store and the adapter delivers
 * (the store-log bus reads the store; the Kafka run relays it with EventStoreRelay). Topics are the real ones
 * from topics.ts, so every case works on its own keys (stream ids carrying a per-run suffix) and its own
 * consumer groups, and ignores other cases' messages.
 */
import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import type { EventStore, NewEvent } from '@stablepay/event-store';
import type { DataSource, QueryRunner } from 'typeorm';
import type { BusMessage, BusSubscription, EventBus } from './event-bus.port';
import { idempotentHandler, migrateProcessedMessages } from './idempotency/idempotent-handler';
import {
  AddParkedStreamRetryClaims1795449600100,
  AddParkedStreamSource1795449600000,
  CreateParkedStreams1767312000000,
} from './projection/projection-runner';
import { SupervisedEventBus } from './supervision/supervised-event-bus';

export interface EventBusFixture {
  /** Stores events as a service does and resolves once they are available to consumers. */
  append(streamId: string, events: readonly NewEvent[]): Promise<void>;
  /** A bus instance standing for one process; several may be open at once. The suite closes it after each case. */
  openBus(): Promise<EventBus>;
  /** A database for the idempotent-handler cases (the read-model side of a consumer) and parked streams. */
  readonly pool: Pool;
  /** The store the events were appended to: a supervised consumer's retry reads a parked stream from it. */
  readonly store: Pick<EventStore, 'readStream'>;
  dispose(): Promise<void>;
}

const TOPIC = 'payments.payment.v1';
const CATEGORY = 'payment';

export function describeEventBusConformance(name: string, setup: () => Promise<EventBusFixture>): void {
  describe(`EventBus conformance: ${name}`, () => {
    const run = randomBytes(4).toString('hex');
    let fixture: EventBusFixture | undefined;
    const opened: EventBus[] = [];

    const env = (): EventBusFixture => {
      if (!fixture) throw new Error('the fixture is not set up');
      return fixture;
    };
    const openBus = async (): Promise<EventBus> => {
      const bus = await env().openBus();
      opened.push(bus);
      return bus;
    };
    const keyOf = (label: string): string => `${CATEGORY}-${run}${label}`;
    const events = (label: string, from: number, count: number): NewEvent[] =>
      Array.from({ length: count }, (_, i) => ({
        id: `${run}:${label}:${from + i}`,
        type: 'PaymentNoted',
        data: { label, n: from + i },
        metadata: { merchantId: 'mer_1', correlationId: `${label}-corr` },
      }));
    const ids = (label: string, from: number, count: number): string[] =>
      events(label, from, count).map((e) => e.id);

    /** Consumes TOPIC in `group`, recording the handled messages whose key is one of this case's keys. */
    const consumeKeys = async (
      bus: EventBus,
      group: string,
      keyPrefix: string,
      handle: (message: BusMessage) => Promise<void> = async () => undefined,
    ): Promise<{ readonly handled: BusMessage[]; readonly subscription: BusSubscription }> => {
      const handled: BusMessage[] = [];
      const subscription = await bus.consume({
        group: `${run}-${group}`,
        topics: [TOPIC],
        handler: async (message) => {
          if (!message.key.startsWith(keyPrefix)) return;
          await handle(message);
          handled.push(message);
        },
      });
      return { handled, subscription };
    };

    beforeAll(async () => {
      fixture = await setup();
    });

    afterEach(async () => {
      await Promise.all(opened.splice(0).map((bus) => bus.close()));
    });

    afterAll(async () => {
      await fixture?.dispose();
    });

    it("delivers each key's messages in order, as the envelope built from the stored event", async () => {
      const keys = ['o1', 'o2', 'o3', 'o4'].map(keyOf);
      await Promise.all(
        keys.map(async (key, k) => {
          for (let chunk = 0; chunk < 5; chunk++) await env().append(key, events(`order${k}`, chunk * 3, 3));
        }),
      );
      const bus = await openBus();
      const { handled, subscription } = await consumeKeys(bus, 'order', keyOf('o'));
      await subscription.caughtUp();
      await subscription.stop();

      expect(handled).toHaveLength(60);
      for (const [k, key] of keys.entries()) {
        const mine = handled.filter((m) => m.key === key);
        expect(mine.map((m) => m.revision)).toEqual(Array.from({ length: 15 }, (_, i) => i));
        expect(mine.map((m) => m.id)).toEqual(ids(`order${k}`, 0, 15));
      }
      expect(handled[0]).toMatchObject({
        topic: TOPIC,
        type: 'PaymentNoted',
        metadata: { merchantId: 'mer_1' },
      });
      expect(handled[0]?.recordedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    });

    it('redelivers a message whose handler failed, then the ones after it, never skipping', async () => {
      const key = keyOf('retry');
      await env().append(key, events('retry', 0, 3));
      const failing = `${run}:retry:1`;
      let failures = 0;
      const attempts: string[] = [];
      const bus = await openBus();
      const { handled, subscription } = await consumeKeys(bus, 'retry', key, async (message) => {
        attempts.push(message.id);
        if (message.id === failing && failures++ === 0) throw new Error('read model unavailable');
      });
      await subscription.caughtUp();
      await subscription.stop();
      expect(handled.map((m) => m.id)).toEqual(ids('retry', 0, 3));
      expect(attempts).toEqual([`${run}:retry:0`, failing, failing, `${run}:retry:2`]);
    });

    it('gives a message whose consumer died before committing it to the next member of the group', async () => {
      const key = keyOf('death');
      await env().append(key, events('death', 0, 3));
      const doomed = `${run}:death:1`;
      let knowSubscription: (subscription: BusSubscription) => void = () => undefined;
      const subscriptionKnown = new Promise<BusSubscription>((resolve) => (knowSubscription = resolve));
      let dying: Promise<void> | undefined;
      const handledBeforeDeath: string[] = [];
      const doomedBus = await openBus();
      knowSubscription(
        await doomedBus.consume({
          group: `${run}-death`,
          topics: [TOPIC],
          handler: async (message) => {
            if (!message.key.startsWith(key)) return;
            if (message.id === doomed) {
              // The process dies in the middle of this message: it stops and the handler never succeeds.
              dying ??= subscriptionKnown.then((subscription) => subscription.stop());
              throw new Error('process killed');
            }
            handledBeforeDeath.push(message.id);
          },
        }),
      );
      await until(() => dying !== undefined);
      await dying;
      expect(handledBeforeDeath).toEqual([`${run}:death:0`]);

      const successor = await openBus();
      const { handled, subscription } = await consumeKeys(successor, 'death', key);
      await subscription.caughtUp();
      await subscription.stop();
      expect(handled.map((m) => m.id)).toEqual(ids('death', 1, 2));
    });

    it('keeps a durable group position: a new member resumes where the group stopped, another group starts over', async () => {
      const key = keyOf('durable');
      await env().append(key, events('durable', 0, 3));
      const firstBus = await openBus();
      const before = await consumeKeys(firstBus, 'durable', key);
      await before.subscription.caughtUp();
      await before.subscription.stop();
      expect(before.handled.map((m) => m.id)).toEqual(ids('durable', 0, 3));

      await env().append(key, events('durable', 3, 2));
      const secondBus = await openBus();
      const after = await consumeKeys(secondBus, 'durable', key);
      await after.subscription.caughtUp();
      await after.subscription.stop();
      expect(after.handled.map((m) => m.id)).toEqual(ids('durable', 3, 2));

      const other = await consumeKeys(secondBus, 'durable-other', key);
      await other.subscription.caughtUp();
      await other.subscription.stop();
      expect(other.handled.map((m) => m.id)).toEqual(ids('durable', 0, 5));
    });

    describe('with a batch handler', () => {
      /** Consumes TOPIC in `group` with handleBatch, recording this case's messages and the batch sizes. */
      const consumeBatches = async (
        bus: EventBus,
        group: string,
        keyPrefix: string,
        handle: (batch: readonly BusMessage[]) => Promise<void> = async () => undefined,
      ): Promise<{ handled: BusMessage[]; calls: number[]; subscription: BusSubscription }> => {
        const handled: BusMessage[] = [];
        const calls: number[] = [];
        const subscription = await bus.consume({
          group: `${run}-${group}`,
          topics: [TOPIC],
          handler: async () => {
            throw new Error('an adapter must call handleBatch instead of handler');
          },
          handleBatch: async (batch) => {
            expect(batch.length).toBeGreaterThan(0);
            await handle(batch);
            calls.push(batch.length);
            handled.push(...batch.filter((m) => m.key.startsWith(keyPrefix)));
          },
        });
        return { handled, calls, subscription };
      };

      it("delivers every message once in batches, each key's messages in order", async () => {
        const keys = ['b1', 'b2', 'b3'].map(keyOf);
        await Promise.all(
          keys.map(async (key, k) => {
            for (let chunk = 0; chunk < 4; chunk++)
              await env().append(key, events(`batch${k}`, chunk * 5, 5));
          }),
        );
        const bus = await openBus();
        const { handled, calls, subscription } = await consumeBatches(bus, 'batch', keyOf('b'));
        await subscription.caughtUp();
        await subscription.stop();
        expect(handled).toHaveLength(60);
        expect(calls.length).toBeLessThan(60);
        for (const [k, key] of keys.entries()) {
          expect(handled.filter((m) => m.key === key).map((m) => m.id)).toEqual(ids(`batch${k}`, 0, 20));
        }
      });

      it('redelivers a failed batch whole and never skips; the group resumes after the last handled batch', async () => {
        const key = keyOf('bfail');
        await env().append(key, events('bfail', 0, 4));
        let failures = 0;
        const bus = await openBus();
        const first = await consumeBatches(bus, 'bfail', key, async (batch) => {
          if (batch.some((m) => m.key === key) && failures++ === 0) throw new Error('read model unavailable');
        });
        await first.subscription.caughtUp();
        await first.subscription.stop();
        expect(failures).toBeGreaterThan(1);
        expect(first.handled.map((m) => m.id)).toEqual(ids('bfail', 0, 4));

        await env().append(key, events('bfail', 4, 2));
        const again = await consumeBatches(await openBus(), 'bfail', key);
        await again.subscription.caughtUp();
        await again.subscription.stop();
        expect(again.handled.map((m) => m.id)).toEqual(ids('bfail', 4, 2));
      });
    });

    describe('supervised, with an isolation key finer than the partition key', () => {
      it("parks only the failing key of a stream: the stream's other keys go on, the key's later messages wait, and a retry runs them in order", async () => {
        const pool = env().pool;
        const dataSource = {
          query: async (sql: string, parameters?: unknown[]) => (await pool.query(sql, parameters)).rows,
        } as unknown as Pick<DataSource, 'query'>;
        for (const migration of [
          new CreateParkedStreams1767312000000(),
          new AddParkedStreamSource1795449600000(),
          new AddParkedStreamRetryClaims1795449600100(),
        ]) {
          await migration.up(dataSource as unknown as QueryRunner);
        }
        // One stream (one partition key) carrying two subjects, as a chain's observation stream carries payments.
        const stream = `chain-${run}:keys`;
        const subject = (m: BusMessage): string => (m.data as { subject: string }).subject;
        const label = (m: BusMessage): string => (m.data as { label: string }).label;
        await env().append(
          stream,
          [
            ['a0', 'A'],
            ['a1', 'A'],
            ['b0', 'B'],
            ['a2', 'A'],
            ['b1', 'B'],
          ].map(([l, s]) => ({ id: `${run}:keys:${l}`, type: 'Observed', data: { label: l, subject: s } })),
        );
        const bus = new SupervisedEventBus(await env().openBus(), {
          dataSource,
          store: env().store,
          logger: { error: () => undefined, warn: () => undefined, log: () => undefined },
          settings: { isolateAfterFailures: 2, retryPollMs: 50, autoRetryAfterMs: 0 },
        });
        const handled: string[] = [];
        let refused = true;
        const group = `${run}-keys`;
        try {
          const subscription = await bus.consume({
            group,
            topics: ['indexer.chain-observation.v1'],
            isolationKey: (m) => `${m.key}:${subject(m)}`,
            handler: async (m) => {
              if (m.key !== stream) return;
              if (refused && label(m) === 'a1') throw new Error('subject A refuses a1');
              handled.push(label(m));
            },
          });
          await subscription.caughtUp();
          expect(handled).toEqual(['a0', 'b0', 'b1']);

          refused = false;
          expect(await bus.consumer(group)?.retry(`${stream}:A`)).toBe('applied');
          expect(handled).toEqual(['a0', 'b0', 'b1', 'a1', 'a2']);

          await env().append(stream, [
            { id: `${run}:keys:a3`, type: 'Observed', data: { label: 'a3', subject: 'A' } },
          ]);
          await subscription.caughtUp();
          expect(handled).toEqual(['a0', 'b0', 'b1', 'a1', 'a2', 'a3']);
        } finally {
          await bus.close();
        }
      });
    });

    describe('with an idempotent handler', () => {
      const effectsTable = `bus_effects_${run}`;

      beforeAll(async () => {
        await migrateProcessedMessages(env().pool);
        await env().pool.query(`CREATE TABLE ${effectsTable} (message_id text NOT NULL, n integer NOT NULL)`);
      });

      const effectRows = async (): Promise<string[]> =>
        (
          await env().pool.query<{ message_id: string }>(`SELECT message_id FROM ${effectsTable} ORDER BY n`)
        ).rows.map((r) => r.message_id);

      it('applies the effect of a message redelivered after its transaction committed only once', async () => {
        const key = keyOf('idem');
        await env().append(key, events('idem', 0, 3));
        const group = `${run}-idem`;
        const outcomes: string[] = [];
        const apply = idempotentHandler(env().pool, group, async (client, message) => {
          const data = message.data as { n: number };
          await client.query(`INSERT INTO ${effectsTable} (message_id, n) VALUES ($1, $2)`, [
            message.id,
            data.n,
          ]);
        });
        let crashedOnce = false;
        const bus = await openBus();
        const subscription = await bus.consume({
          group,
          topics: [TOPIC],
          handler: async (message) => {
            if (!message.key.startsWith(key)) return;
            outcomes.push(`${message.id}:${await apply(message)}`);
            // The effect and its mark are committed, but the process dies before acknowledging the message.
            if (message.id === `${run}:idem:1` && !crashedOnce) {
              crashedOnce = true;
              throw new Error('died before the ack');
            }
          },
        });
        await subscription.caughtUp();
        await subscription.stop();
        expect(outcomes).toEqual([
          `${run}:idem:0:applied`,
          `${run}:idem:1:applied`,
          `${run}:idem:1:skipped`,
          `${run}:idem:2:applied`,
        ]);
        expect(await effectRows()).toEqual(ids('idem', 0, 3));
      });

      it('rolls back the processed mark with a failed effect, so the redelivery applies it', async () => {
        const key = keyOf('rollback');
        await env().append(key, events('rollback', 0, 2));
        const group = `${run}-rollback`;
        let failOnce = true;
        const apply = idempotentHandler(env().pool, group, async (client, message) => {
          const data = message.data as { n: number };
          await client.query(`INSERT INTO ${effectsTable} (message_id, n) VALUES ($1, $2)`, [
            message.id,
            100 + data.n,
          ]);
          if (message.id === `${run}:rollback:0` && failOnce) {
            failOnce = false;
            throw new Error('constraint violated half-way');
          }
        });
        const bus = await openBus();
        const subscription = await bus.consume({
          group,
          topics: [TOPIC],
          handler: async (message) => {
            if (message.key.startsWith(key)) await apply(message);
          },
        });
        await subscription.caughtUp();
        await subscription.stop();
        expect((await effectRows()).filter((id) => id.includes(':rollback:'))).toEqual(ids('rollback', 0, 2));
        const marks = await env().pool.query('SELECT 1 FROM processed_messages WHERE consumer_group = $1', [
          group,
        ]);
        expect(marks.rowCount).toBe(2);
      });
    });
  });
}

async function until(condition: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
