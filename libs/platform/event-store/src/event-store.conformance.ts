/**
 * The behaviour every EventStore adapter must show, as one Jest suite. An adapter's spec file calls
 * `describeEventStoreConformance(name, setup)`; the suite shares one backing store between its cases, so each
 * case works in its own streams and categories (names carry a per-run suffix, which also keeps reruns against a
 * persistent server such as EventStoreDB apart).
 */
import { randomBytes } from 'node:crypto';
import {
  WrongExpectedRevisionError,
  type EventStore,
  type NewEvent,
  type RecordedEvent,
  type StoreSubscription,
  type SubscribeToAllOptions,
} from './event-store.port';

export interface EventStoreFixture {
  /** Opens a store instance on the shared backing. Opening a second one stands for another process or a restart. */
  open(): Promise<EventStore>;
  /** Releases the backing (drops the database...); called after every instance was closed. */
  dispose(): Promise<void>;
}

export function describeEventStoreConformance(name: string, setup: () => Promise<EventStoreFixture>): void {
  describe(`EventStore conformance: ${name}`, () => {
    const run = randomBytes(4).toString('hex');
    let fixture: EventStoreFixture | undefined;
    let store: EventStore;
    let counter = 0;

    /** A category unique to this run (categories are the part of a stream id before the first '-'). */
    const category = (base: string): string => `${base}${run}`;
    const streamOf = (base: string): string => `${category(base)}-${++counter}`;
    const events = (label: string, count: number, type = 'ThingHappened'): NewEvent[] =>
      Array.from({ length: count }, (_, i) => ({
        id: `${run}:${label}:${i}`,
        type,
        data: { label, i, note: 'ünïcødé ✓' },
        metadata: { correlationId: `${label}-corr`, merchantId: 'mer_1' },
      }));

    const openAnother = (): Promise<EventStore> => {
      if (!fixture) throw new Error('the fixture is not set up');
      return fixture.open();
    };

    beforeAll(async () => {
      fixture = await setup();
      store = await fixture.open();
    });

    afterAll(async () => {
      await store?.close();
      await fixture?.dispose();
    });

    describe('appending with an expected revision', () => {
      it("appends to a new stream with 'no_stream' and returns the last revision and its global position", async () => {
        const stream = streamOf('acct');
        const result = await store.appendToStream(stream, events('new', 3), {
          expectedRevision: 'no_stream',
        });
        expect(result.nextExpectedRevision).toBe(2);
        const stored = await store.readStream(stream);
        expect(stored.map((e) => e.revision)).toEqual([0, 1, 2]);
        expect(result.lastGlobalPosition).toBe(stored[2]?.globalPosition);
      });

      it("rejects 'no_stream' on an existing stream with a typed error naming the actual revision", async () => {
        const stream = streamOf('acct');
        await store.appendToStream(stream, events('ns1', 2), { expectedRevision: 'no_stream' });
        const error = await store
          .appendToStream(stream, events('ns2', 1), { expectedRevision: 'no_stream' })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ streamId: stream, expected: 'no_stream', actual: 1 });
        expect(await store.readStream(stream)).toHaveLength(2);
      });

      it("accepts 'stream_exists' only once the stream has events", async () => {
        const stream = streamOf('acct');
        const error = await store
          .appendToStream(stream, events('se1', 1), { expectedRevision: 'stream_exists' })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ expected: 'stream_exists', actual: 'no_stream' });
        await store.appendToStream(stream, events('se2', 1), { expectedRevision: 'no_stream' });
        const result = await store.appendToStream(stream, events('se3', 1), {
          expectedRevision: 'stream_exists',
        });
        expect(result.nextExpectedRevision).toBe(1);
      });

      it('accepts a numeric expected revision equal to the last revision and rejects a stale one', async () => {
        const stream = streamOf('acct');
        const first = await store.appendToStream(stream, events('num1', 2), {
          expectedRevision: 'no_stream',
        });
        const second = await store.appendToStream(stream, events('num2', 1), {
          expectedRevision: first.nextExpectedRevision,
        });
        expect(second.nextExpectedRevision).toBe(2);
        expect(second.lastGlobalPosition).toBeGreaterThan(first.lastGlobalPosition);
        const error = await store
          .appendToStream(stream, events('num3', 1), { expectedRevision: first.nextExpectedRevision })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ expected: 1, actual: 2 });
      });

      it('rejects a numeric expected revision on a stream that does not exist', async () => {
        const error = await store
          .appendToStream(streamOf('acct'), events('num4', 1), { expectedRevision: 0 })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ expected: 0, actual: 'no_stream' });
      });

      it("appends with 'any' whether or not the stream exists", async () => {
        const stream = streamOf('acct');
        expect((await store.appendToStream(stream, events('any1', 1))).nextExpectedRevision).toBe(0);
        const result = await store.appendToStream(stream, events('any2', 2), { expectedRevision: 'any' });
        expect(result.nextExpectedRevision).toBe(2);
      });
    });

    describe('reading a stream', () => {
      const stream = streamOf('read');
      beforeAll(async () => {
        await store.appendToStream(stream, events('read', 5), { expectedRevision: 'no_stream' });
      });

      it('reads forwards from the first event, or from a revision up to a count', async () => {
        const all = await store.readStream(stream);
        expect(all.map((e) => e.revision)).toEqual([0, 1, 2, 3, 4]);
        const some = await store.readStream(stream, { fromRevision: 2, maxCount: 2 });
        expect(some.map((e) => e.revision)).toEqual([2, 3]);
      });

      it('reads backwards from the last event, or from a revision up to a count', async () => {
        const all = await store.readStream(stream, { direction: 'backwards' });
        expect(all.map((e) => e.revision)).toEqual([4, 3, 2, 1, 0]);
        const some = await store.readStream(stream, { direction: 'backwards', fromRevision: 3, maxCount: 2 });
        expect(some.map((e) => e.revision)).toEqual([3, 2]);
      });

      it('returns each event as it was appended, with its stream, revision, position and time', async () => {
        const [first] = await store.readStream(stream, { maxCount: 1 });
        expect(first).toMatchObject({
          id: `${run}:read:0`,
          streamId: stream,
          type: 'ThingHappened',
          data: { label: 'read', i: 0, note: 'ünïcødé ✓' },
          metadata: { correlationId: 'read-corr', merchantId: 'mer_1' },
          revision: 0,
        });
        expect(typeof first?.globalPosition).toBe('bigint');
        expect(first?.recordedAt).toBeInstanceOf(Date);
      });

      it('reads a stream that does not exist as empty', async () => {
        expect(await store.readStream(streamOf('read'))).toEqual([]);
        expect(await store.readStream(streamOf('read'), { direction: 'backwards' })).toEqual([]);
      });
    });

    describe('the global order', () => {
      it('orders events of sequential appends to different streams by strictly increasing position, in append order', async () => {
        const before = await store.headPosition();
        const a = streamOf('glob');
        const b = streamOf('glob');
        await store.appendToStream(a, events('g1', 2));
        await store.appendToStream(b, events('g2', 1));
        await store.appendToStream(a, events('g3', 1));
        const read = await store.readAll({ after: before, categories: [category('glob')] });
        expect(read.map((e) => e.id)).toEqual([`${run}:g1:0`, `${run}:g1:1`, `${run}:g2:0`, `${run}:g3:0`]);
        expectStrictlyIncreasing(read.map((e) => e.globalPosition));
        expect(await store.headPosition()).toBeGreaterThanOrEqual(read[3]?.globalPosition ?? 0n);
      });

      it('reads after a position, at most maxCount events, of the requested categories only', async () => {
        const before = await store.headPosition();
        await store.appendToStream(streamOf('pagea'), events('pa', 3));
        await store.appendToStream(streamOf('pageb'), events('pb', 2));
        await store.appendToStream(streamOf('pagea'), events('pa2', 1));
        const firstPage = await store.readAll({
          after: before,
          maxCount: 2,
          categories: [category('pagea')],
        });
        expect(firstPage.map((e) => e.id)).toEqual([`${run}:pa:0`, `${run}:pa:1`]);
        const secondPage = await store.readAll({
          after: firstPage[1]?.globalPosition ?? 0n,
          categories: [category('pagea')],
        });
        expect(secondPage.map((e) => e.id)).toEqual([`${run}:pa:2`, `${run}:pa2:0`]);
        const both = await store.readAll({
          after: before,
          categories: [category('pagea'), category('pageb')],
        });
        expect(both).toHaveLength(6);
        const everything = await store.readAll({ after: before, maxCount: 1000 });
        expect(everything.filter((e) => e.id.startsWith(`${run}:p`))).toHaveLength(6);
      });
    });

    describe('idempotent retries', () => {
      it('an append retried with the same event ids writes nothing and returns the original result', async () => {
        const stream = streamOf('idem');
        const batch = events('idem', 2);
        const original = await store.appendToStream(stream, batch, { expectedRevision: 'no_stream' });
        expect(original.retried).toBeFalsy();
        // A retry says so (a creation command appending without reading first tells a retry from a new stream).
        expect(await store.appendToStream(stream, batch, { expectedRevision: 'no_stream' })).toEqual({
          ...original,
          retried: true,
        });
        expect(await store.appendToStream(stream, batch, { expectedRevision: 'any' })).toEqual({
          ...original,
          retried: true,
        });

        const next = events('idem-next', 1);
        const second = await store.appendToStream(stream, next, { expectedRevision: 1 });
        expect(second.retried).toBeFalsy();
        expect(await store.appendToStream(stream, next, { expectedRevision: 1 })).toEqual({
          ...second,
          retried: true,
        });
        expect(await store.appendToStream(stream, next)).toEqual({ ...second, retried: true });

        const stored = await store.readStream(stream);
        expect(stored.map((e) => e.id)).toEqual([...batch, ...next].map((e) => e.id));
      });
    });

    describe('concurrency', () => {
      it('1,000 concurrent appends to one stream leave revisions 0..999 with no gap and no duplicate', async () => {
        const stream = streamOf('hot');
        const results = await Promise.all(
          Array.from({ length: 1000 }, (_, i) =>
            store.appendToStream(stream, [{ id: `${run}:hot:${i}`, type: 'Hit', data: { i } }], {
              expectedRevision: 'any',
            }),
          ),
        );
        expect(new Set(results.map((r) => r.nextExpectedRevision)).size).toBe(1000);
        const stored = await store.readStream(stream);
        expect(stored.map((e) => e.revision)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
        expect(new Set(stored.map((e) => e.id)).size).toBe(1000);
        expectStrictlyIncreasing(stored.map((e) => e.globalPosition));
      });

      it('a subscriber sees every event of concurrent appends to many streams exactly once, in global order', async () => {
        const cat = category('busy');
        const seen: RecordedEvent[] = [];
        const subscription = await store.subscribeToAll({
          subscriptionId: `${run}:busy`,
          categories: [cat],
          handler: async (event) => {
            seen.push(event);
          },
        });
        try {
          const streams = Array.from({ length: 20 }, () => streamOf('busy'));
          const appended = await Promise.all(
            streams.flatMap((stream, s) =>
              Array.from({ length: 10 }, (_, k) =>
                store.appendToStream(stream, events(`busy-${s}-${k}`, 3), { expectedRevision: 'any' }),
              ),
            ),
          );
          expect(appended).toHaveLength(200);
          await subscription.caughtUp();
          expect(seen).toHaveLength(600);
          expect(new Set(seen.map((e) => e.id)).size).toBe(600);
          // The global order is the store's log order (not necessarily numeric for concurrent appends).
          const log = await store.readAll({ categories: [cat], maxCount: 1000 });
          expect(seen.map((e) => e.id)).toEqual(log.map((e) => e.id));
          for (const stream of streams) {
            const revisions = seen.filter((e) => e.streamId === stream).map((e) => e.revision);
            expect(revisions).toEqual(Array.from({ length: 30 }, (_, i) => i));
          }
        } finally {
          await subscription.stop();
        }
      });
    });

    describe('the whole log', () => {
      it('pages through the log with `after` exactly as one read returns it, across digit-count boundaries (9, 99, 999...)', async () => {
        // Runs after the cases above, so the log holds well over a thousand events by now, many of them from
        // concurrent appends (where a store's log order may differ from the numeric order of positions).
        const all = await store.readAll({ maxCount: 5000 });
        expect(all.length).toBeGreaterThan(1000);
        expect(new Set(all.map((e) => e.globalPosition)).size).toBe(all.length);
        const paged: bigint[] = [];
        for (let after = 0n; ;) {
          const page = await store.readAll({ after, maxCount: 7 });
          if (page.length === 0 || paged.length >= 1500) break;
          paged.push(...page.map((e) => e.globalPosition));
          after = page[page.length - 1]?.globalPosition ?? after;
        }
        expect(paged).toEqual(all.slice(0, paged.length).map((e) => e.globalPosition));
      });
    });

    describe('catch-up subscriptions', () => {
      it('delivers stored then new events in global order, and caughtUp waits for the events stored before it', async () => {
        const cat = category('live');
        await store.appendToStream(`${cat}-1`, events('live-old', 3));
        const seen: string[] = [];
        const subscription = await store.subscribeToAll({
          subscriptionId: `${run}:live`,
          categories: [cat],
          handler: async (event) => {
            seen.push(event.id);
          },
        });
        try {
          await subscription.caughtUp();
          expect(seen).toEqual(events('live-old', 3).map((e) => e.id));
          await store.appendToStream(`${cat}-2`, events('live-new', 2));
          await subscription.caughtUp();
          expect(seen).toEqual([...events('live-old', 3), ...events('live-new', 2)].map((e) => e.id));
        } finally {
          await subscription.stop();
        }
      });

      it('resumes from its durable checkpoint after a restart: only the new events, none twice', async () => {
        const cat = category('restart');
        const subscriptionId = `${run}:restart`;
        const seen: string[] = [];
        const options: SubscribeToAllOptions = {
          subscriptionId,
          categories: [cat],
          handler: async (event) => {
            seen.push(event.id);
          },
        };
        await store.appendToStream(`${cat}-1`, events('before', 3));

        const firstProcess = await openAnother();
        const first = await firstProcess.subscribeToAll(options);
        await first.caughtUp();
        await first.stop();
        await firstProcess.close();
        expect(seen).toEqual(events('before', 3).map((e) => e.id));

        await store.appendToStream(`${cat}-1`, events('while-down', 2));
        await store.appendToStream(`${cat}-2`, events('while-down-2', 1));

        const secondProcess = await openAnother();
        try {
          const second = await secondProcess.subscribeToAll(options);
          await second.caughtUp();
          await second.stop();
        } finally {
          await secondProcess.close();
        }
        expect(seen).toEqual(
          [...events('before', 3), ...events('while-down', 2), ...events('while-down-2', 1)].map((e) => e.id),
        );
      });

      it('retries a failing handler on the same event with back-off and never skips it', async () => {
        const cat = category('retry');
        await store.appendToStream(`${cat}-1`, events('retry', 3));
        const failing = `${run}:retry:1`;
        let failuresLeft = 2;
        const handled: string[] = [];
        const reported: string[] = [];
        const subscription = await store.subscribeToAll({
          subscriptionId: `${run}:retry`,
          categories: [cat],
          handler: async (event) => {
            if (event.id === failing && failuresLeft-- > 0)
              throw new Error('projection database unavailable');
            handled.push(event.id);
          },
          onError: (_error, event) => reported.push(event.id),
        });
        try {
          await subscription.caughtUp();
        } finally {
          await subscription.stop();
        }
        expect(handled).toEqual(events('retry', 3).map((e) => e.id));
        expect(reported).toEqual([failing, failing]);
      });

      it('stop ends a subscription without losing events appended afterwards', async () => {
        const cat = category('stop');
        const seen: string[] = [];
        const options: SubscribeToAllOptions = {
          subscriptionId: `${run}:stop`,
          categories: [cat],
          handler: async (event) => {
            seen.push(event.id);
          },
        };
        const subscription = await store.subscribeToAll(options);
        await subscription.caughtUp();
        await subscription.stop();
        await store.appendToStream(`${cat}-1`, events('after-stop', 2));
        await new Promise((resolve) => setTimeout(resolve, 150));
        expect(seen).toEqual([]);
        const again = await store.subscribeToAll(options);
        await again.caughtUp();
        await again.stop();
        expect(seen).toEqual(events('after-stop', 2).map((e) => e.id));
      });
    });
  });
}

function expectStrictlyIncreasing(positions: readonly bigint[]): void {
  for (let i = 1; i < positions.length; i++) {
    const previous = positions[i - 1] ?? 0n;
    const current = positions[i] ?? 0n;
    if (current <= previous) throw new Error(`position ${current} at index ${i} does not follow ${previous}`);
  }
}

/** For adapter specs that add their own cases: collects what a subscription delivers. */
export async function collectSubscription(
  store: EventStore,
  options: Omit<SubscribeToAllOptions, 'handler'>,
): Promise<{ readonly seen: RecordedEvent[]; readonly subscription: StoreSubscription }> {
  const seen: RecordedEvent[] = [];
  const subscription = await store.subscribeToAll({
    ...options,
    handler: async (event) => {
      seen.push(event);
    },
  });
  return { seen, subscription };
}
