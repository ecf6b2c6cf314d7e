import type { DataSource } from 'typeorm';
import { register } from 'prom-client';
import { openDataSource } from '@stablepay/database';
import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import { createTestDatabase, eventually, type TestDatabase } from '@stablepay/testing';
import { makeError } from 'ethers';
import type { Pool } from 'pg';
import { chainObservationIsolationKey } from '../chain-observation-key';
import { recordingBus } from '../recording-bus';
import type { BusMessage, BusSubscription, ConsumeOptions, EventBus } from '../event-bus.port';
import {
  listParkedStreams,
  PARKED_STREAMS_MIGRATIONS,
  requestParkedStreamRetry,
} from '../projection/projection-runner';
import { StoreLogEventBus } from '../store-log/store-log-event-bus';
import { isConnectionLoss, isTransient } from './failure-kind';
import { OutageGrace } from './outage-grace';
import { type ConsumerSupervisionSettings, RETRY_DUE, SupervisedEventBus } from './supervised-event-bus';

const TOPIC = 'payments.payment.v1';
const OTHER_TOPIC = 'subscriptions.subscription.v1';
const CHAIN_TOPIC = 'indexer.chain-observation.v1';
/** Polling with a generous bound (the machine is shared): never a timed assertion. */
const POLL = { timeoutMs: 30_000, intervalMs: 50 };

const silentLogger = { error: () => undefined, warn: () => undefined, log: () => undefined };

const message = (topic: string, key: string, revision: number, label: string): BusMessage => ({
  id: `${key}:${label}`,
  topic,
  key,
  type: 'PaymentNoted',
  data: { label },
  metadata: {},
  revision,
  recordedAt: new Date().toISOString(),
});

/** The DataSource without its driver's pool: the bus hears no notifications on it and polls only. */
function pollingOnly(on: Pick<DataSource, 'query'>): Pick<DataSource, 'query'> {
  return { query: (sql: string, parameters?: unknown[]) => on.query(sql, parameters) };
}

/** A promise the test resolves when it chooses. */
function gate(): { readonly wait: Promise<void>; readonly open: () => void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

describe('SupervisedEventBus', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let store: PostgresEventStore;
  let bus: SupervisedEventBus;
  const logged: Array<Record<string, unknown>> = [];

  const append = (stream: string, labels: string[]): Promise<unknown> =>
    store.appendToStream(
      stream,
      labels.map((label) => ({ id: `${stream}:${label}`, type: 'PaymentNoted', data: { label } })),
    );
  const label = (m: BusMessage): string => (m.data as { label: string }).label;
  /**
   * A member of a group on a scripted inner bus (the test delivers), parking in the real table. It polls only (as on
   * PGlite), unless `notified`: the tests drive its retries by hand, which a poll woken by each notification of their
   * own writes would run beside them.
   */
  const scriptedMember = (
    settings: ConsumerSupervisionSettings,
    on: Pick<DataSource, 'query'> = dataSource,
    notified = false,
  ): { readonly supervised: SupervisedEventBus; readonly consumers: ConsumeOptions[] } => {
    const scripted = recordingBus();
    const supervised = new SupervisedEventBus(scripted.bus, {
      dataSource: notified ? on : pollingOnly(on),
      store,
      logger: silentLogger,
      settings,
    });
    return { supervised, consumers: scripted.consumers };
  };
  /** A row as another member (another process) leaves it: this stream is parked at that revision. */
  const parkedByAnotherMember = (group: string, stream: string, revision: number): Promise<unknown> =>
    dataSource.query(
      `INSERT INTO parked_streams (projection, stream_id, event_id, revision, event_type, error)
       VALUES ($1, $2, $3, $4, 'PaymentNoted', 'Error: refused')`,
      [group, stream, `${stream}:${revision}`, revision],
    );
  /**
   * Two members of a group on scripted buses, retried by hand (no polls), `stream` (k0, k1) parked at k0 by a third.
   * The first member's handler holds at k0 (`inRetry` opens) until the test opens `release`, then fails there when
   * `firstFails`; each member records the messages it handled. The second member polls each `secondPollMs` when
   * given (it runs requested retries by itself).
   */
  const twoMembersRetrying = async (
    group: string,
    stream: string,
    options: { firstFails: boolean; secondPollMs?: number },
  ) => {
    await append(stream, ['k0', 'k1']);
    await parkedByAnotherMember(group, stream, 0);
    const inRetry = gate();
    const release = gate();
    const handledBy = { first: [] as string[], second: [] as string[] };
    const members = await Promise.all(
      (['first', 'second'] as const).map(async (name) => {
        const pollMs = name === 'second' ? options.secondPollMs : undefined;
        const { supervised } = scriptedMember({ retryPollMs: pollMs ?? 60_000, autoRetryAfterMs: 0 });
        const subscription = await supervised.consume({
          group,
          topics: [TOPIC],
          handler: async (m) => {
            handledBy[name].push(label(m));
            if (name === 'first' && label(m) === 'k0') {
              inRetry.open();
              await release.wait;
              if (options.firstFails) throw new Error('still broken');
            }
          },
        });
        return { name, supervised, subscription };
      }),
    );
    return {
      inRetry,
      release,
      handledBy,
      retry: (name: 'first' | 'second') =>
        members
          .find((m) => m.name === name)
          ?.supervised.consumer(group)
          ?.retry(stream),
      /** Stops a member's subscription (as a shutdown does), leaving its bus to `close`. */
      stop: (name: 'first' | 'second') => members.find((m) => m.name === name)?.subscription.stop(),
      close: async () => {
        for (const m of members) {
          await m.subscription.stop();
          await m.supervised.close();
        }
      },
    };
  };
  /**
   * A member of `group` on a scripted bus, retried by hand (no polls), `stream` parked at revision 0 by another
   * member: its handler records the labels it handles and holds at `holdAt` (`inRetry` opens) until `release`.
   */
  const memberHolding = async (
    group: string,
    stream: string,
    holdAt: string,
    settings: ConsumerSupervisionSettings = {},
    on: DataSource = dataSource,
  ) => {
    await parkedByAnotherMember(group, stream, 0);
    const inRetry = gate();
    const release = gate();
    const handled: string[] = [];
    const { supervised } = scriptedMember({ retryPollMs: 60_000, autoRetryAfterMs: 0, ...settings }, on);
    const subscription = await supervised.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        handled.push(label(m));
        if (label(m) === holdAt) {
          inRetry.open();
          await release.wait;
        }
      },
    });
    return {
      inRetry,
      release,
      handled,
      subscription,
      retry: () => supervised.consumer(group)?.retry(stream),
      close: async () => {
        release.open();
        await subscription.stop();
        await supervised.close();
      },
    };
  };
  /** The group failed well past the isolate pass (3 failures in a row in these tests) and parked nothing. */
  const failedPastIsolatePassUnparked = async (errors: unknown[], group: string): Promise<void> => {
    await eventually(
      async () => errors.length,
      (n) => n >= 6,
      'failures',
      POLL,
    );
    expect(await listParkedStreams(dataSource, group)).toEqual([]);
  };
  /** The group's parked row as another member's retry claim leaves it (a negative interval: it expired). */
  const claimedBy = (group: string, member: string, untilFromNow: string): Promise<unknown> =>
    dataSource.query(
      `UPDATE parked_streams SET retry_claimed_by = $2, retry_claimed_until = now() + $3::interval WHERE projection = $1`,
      [group, member, untilFromNow],
    );
  const of = (handled: string[], stream: string): string[] =>
    handled.filter((h) => h.startsWith(`${stream}:`)).map((h) => h.slice(stream.length + 1));

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({
      url: database.url,
      migrations: [...PARKED_STREAMS_MIGRATIONS],
    });
    store = await createPostgresEventStore({
      url: database.url,
      poolSize: 3,
      subscriptions: { retry: { initialMs: 10, maxMs: 50 } },
    });
    bus = new SupervisedEventBus(new StoreLogEventBus(store), {
      // Polled every 50 ms, not notified: its tests drive retries by hand beside that poll.
      dataSource: pollingOnly(dataSource),
      store,
      logger: {
        error: (m) => logged.push({ level: 'error', ...m }),
        warn: (m) => logged.push({ level: 'warn', ...m }),
        log: (m) => logged.push({ level: 'log', ...m }),
      },
      settings: { isolateAfterFailures: 3, retryPollMs: 50, autoRetryAfterMs: 0 },
    });
  });

  afterAll(async () => {
    await bus?.close();
    await store?.close();
    await dataSource?.destroy();
    await database?.drop();
  });

  it("parks the stream of a message that keeps failing while another merchant's messages are handled, keeps its later messages waiting in order, and a retry handles them in order", async () => {
    const group = 'test.consumer-parking';
    const handled: string[] = [];
    let refused = true;
    const subscription = await bus.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        if (label(m) === 'poison' && refused) throw new Error('the database refuses this draft');
        handled.push(`${m.key}:${label(m)}`);
      },
    });
    try {
      await append('payment-pa', ['a0', 'poison', 'a2']);
      await append('payment-pb', ['b0', 'b1']);
      await subscription.caughtUp();
      expect(of(handled, 'payment-pa')).toEqual(['a0']);
      expect(of(handled, 'payment-pb')).toEqual(['b0', 'b1']);
      const [parked] = await listParkedStreams(dataSource, group);
      expect(parked).toMatchObject({
        streamId: 'payment-pa',
        revision: 1,
        eventId: 'payment-pa:poison',
        waitingRevision: 2,
      });
      expect(parked?.error).toMatch(/refuses this draft/);
      expect(bus.health.readiness()).toEqual({
        stalled: [],
        degraded: [`${group}: 1 parked stream(s)`],
      });
      expect(logged.some((l) => l['level'] === 'error' && l['streamId'] === 'payment-pa')).toBe(true);
      expect(await register.metrics()).toContain(`stablepay_consumer_parked_streams{group="${group}"} 1`);

      // Other streams go on; the parked stream's new messages wait behind the parked one.
      await append('payment-pb', ['b2']);
      await append('payment-pa', ['a3']);
      await subscription.caughtUp();
      expect(of(handled, 'payment-pb')).toEqual(['b0', 'b1', 'b2']);
      expect(of(handled, 'payment-pa')).toEqual(['a0']);
      expect((await listParkedStreams(dataSource, group))[0]?.waitingRevision).toBe(3);

      // A retry before the cause is fixed fails again: still parked, nothing after it handled.
      expect(await bus.consumer(group)?.retry('payment-pa')).toBe('still_parked');
      expect((await listParkedStreams(dataSource, group))[0]?.attempts).toBe(2);
      expect(of(handled, 'payment-pa')).toEqual(['a0']);

      // Fixed, then retried the operator's way (the admin route/CLI mark the row; the owning consumer runs it).
      refused = false;
      expect(await requestParkedStreamRetry(dataSource, group, 'payment-pa')).toBe(true);
      await eventually(
        () => listParkedStreams(dataSource, group),
        (p) => p.length === 0,
        'the stream released',
        POLL,
      );
      expect(of(handled, 'payment-pa')).toEqual(['a0', 'poison', 'a2', 'a3']);
      expect(bus.health.readiness()).toEqual({ stalled: [], degraded: [] });

      await append('payment-pa', ['a4']);
      await subscription.caughtUp();
      expect(of(handled, 'payment-pa')).toEqual(['a0', 'poison', 'a2', 'a3', 'a4']);
    } finally {
      await subscription.stop();
    }
  });

  it('isolates a failing batch message by message: the batch form handles every other stream and parks the culprit', async () => {
    const group = 'test.consumer-batch-parking';
    const handled: string[] = [];
    const subscription = await bus.consume({
      group,
      topics: [TOPIC],
      handler: () => Promise.reject(new Error('the batch form is used')),
      handleBatch: async (messages) => {
        if (messages.some((m) => label(m) === 'poison')) throw new Error('one draft of the batch is refused');
        for (const m of messages) handled.push(`${m.key}:${label(m)}`);
      },
    });
    try {
      await append('payment-qa', ['a0', 'poison', 'a2']);
      await append('payment-qb', ['b0']);
      await subscription.caughtUp();
      expect(of(handled, 'payment-qa')).toEqual(['a0']);
      expect(of(handled, 'payment-qb')).toEqual(['b0']);
      // (A new group reads the topic from its start: the first test's poison is parked here too.)
      const parked = await listParkedStreams(dataSource, group);
      expect(parked.find((p) => p.streamId === 'payment-qa')).toMatchObject({
        revision: 1,
        waitingRevision: 2,
      });
      expect(parked.map((p) => p.streamId).sort()).toEqual(['payment-pa', 'payment-qa']);
    } finally {
      await subscription.stop();
    }
  });

  it('parks a message that always hits a statement timeout (SQLSTATE 57014) after a few transient failures, while the database answers', async () => {
    if (database.kind === 'pglite') {
      // PGlite (single-threaded WASM) never cancels a running statement: statement_timeout does not fire there.
      console.log('skipped on PGlite: statement_timeout does not fire');
      return;
    }
    const group = 'test.consumer-statement-timeout';
    const handled: string[] = [];
    const errors: unknown[] = [];
    const subscription = await bus.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        if (label(m) === 'slow')
          await dataSource.transaction(async (em) => {
            await em.query(`SET LOCAL statement_timeout = '20ms'`);
            await em.query('SELECT pg_sleep(2)');
          });
        handled.push(`${m.key}:${label(m)}`);
      },
      onError: (error) => errors.push(error),
    });
    try {
      await append('payment-ta', ['slow', 'a1']);
      await append('payment-tb', ['b0']);
      await subscription.caughtUp();
      expect(of(handled, 'payment-tb')).toEqual(['b0']);
      expect(of(handled, 'payment-ta')).toEqual([]);
      const [parked] = await listParkedStreams(dataSource, group);
      expect(parked).toMatchObject({ streamId: 'payment-ta', revision: 0, waitingRevision: 1 });
      expect(parked?.error).toMatch(/statement timeout/);
      // Retried as transient first (it may be a passing overload), never taken for a lost connection.
      expect(errors.length).toBeGreaterThanOrEqual(2);
      expect(errors.every((e) => isTransient(e) && !isConnectionLoss(e))).toBe(true);
    } finally {
      await subscription.stop();
    }
  });

  it('counts failures per failing delivery and tracks progress per topic: successes on another topic neither reset the count (it parks) nor hide the stall', async () => {
    const group = 'test.consumer-two-topics';
    let now = Date.parse('2026-01-01T00:00:00Z');
    const { supervised, consumers } = scriptedMember({
      isolateAfterFailures: 5,
      stalledAfterFailures: 3,
      stalledAfterMs: 60_000,
      retryPollMs: 60_000,
      autoRetryAfterMs: 0,
      clock: () => now,
    });
    const handled: string[] = [];
    const subscription = await supervised.consume({
      group,
      topics: [TOPIC, OTHER_TOPIC],
      handler: async (m) => {
        if (label(m) === 'poison') throw new Error('the database refuses this draft');
        handled.push(m.id);
      },
    });
    const options = consumers[0];
    if (!options) throw new Error('not consuming');
    // The store-log bus retries each topic's subscription on its own: the other topic's deliveries come in between.
    const poison = message(TOPIC, 'payment-ma', 0, 'poison');
    let b = 0;
    const other = (): Promise<void> => options.handler(message(OTHER_TOPIC, 'subscription-mb', b, `b${b++}`));
    try {
      await expect(options.handler(poison)).rejects.toThrow(/refuses/);
      now += 30_000;
      await other();
      now += 31_000;
      // 61 s without progress on the failing topic, though the other one progressed 31 s ago.
      expect(supervised.health.statuses()[0]).toMatchObject({
        stalled: true,
        lastProgressAt: '2026-01-01T00:00:00.000Z',
      });
      expect(supervised.health.statuses()[0]?.reason).toMatch(
        /no progress for 61 s .*failing delivery on payments/,
      );
      await expect(options.handler(poison)).rejects.toThrow(/refuses/);
      await other();
      await expect(options.handler(poison)).rejects.toThrow(/refuses/);
      await other();
      expect(supervised.health.readiness().stalled).toEqual([
        `${group} stalled: 3 failures in a row: Error: the database refuses this draft`,
      ]);
      await expect(options.handler(poison)).rejects.toThrow(/refuses/);
      await other();
      // The fifth failure in a row of that delivery: parked, every other stream goes on.
      await options.handler(poison);
      expect(await listParkedStreams(dataSource, group)).toEqual([
        expect.objectContaining({ streamId: 'payment-ma', eventId: 'payment-ma:poison' }),
      ]);
      expect(supervised.health.readiness()).toEqual({
        stalled: [],
        degraded: [`${group}: 1 parked stream(s)`],
      });
      expect(handled).toEqual([
        'subscription-mb:b0',
        'subscription-mb:b1',
        'subscription-mb:b2',
        'subscription-mb:b3',
      ]);
    } finally {
      await subscription.stop();
      await supervised.close();
    }
  });

  it("loads the streams another member parked when the adapter announces a partition assignment, before handling that stream's later messages", async () => {
    const group = 'test.consumer-assignment';
    const { supervised: member, consumers } = scriptedMember({ retryPollMs: 60_000, autoRetryAfterMs: 0 });
    const handled: string[] = [];
    const subscription = await member.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        handled.push(m.id);
      },
    });
    const options = consumers[0];
    try {
      // Another member parked the stream after this one started (it had no partition of it then).
      await parkedByAnotherMember(group, 'payment-ra', 1);
      // A rebalance gives this member the partition; the adapter announces it before the first message.
      await options?.onAssigned?.();
      await options?.handler(message(TOPIC, 'payment-ra', 2, 'r2'));
      await options?.handler(message(TOPIC, 'payment-rb', 0, 'b0'));
      expect(handled).toEqual(['payment-rb:b0']);
      expect((await listParkedStreams(dataSource, group))[0]).toMatchObject({
        streamId: 'payment-ra',
        revision: 1,
        waitingRevision: 2,
      });
    } finally {
      await subscription.stop();
      await member.close();
    }
  });

  it("keeps an operator's retry asked of a member while another member's retry runs and then fails", async () => {
    const group = 'test.consumer-retry-kept';
    const members = await twoMembersRetrying(group, 'payment-kc', { firstFails: true });
    try {
      const retrying = members.retry('first');
      await members.inRetry.wait;
      expect(await members.retry('second')).toBe('requested');
      members.release.open();
      expect(await retrying).toBe('still_parked');
      // The request made while the failing retry ran is still there for the next poll to run.
      const [row] = await listParkedStreams(dataSource, group);
      expect(row?.retryRequestedAt).not.toBeNull();
    } finally {
      await members.close();
    }
  });

  it('runs a requested retry in a member that parked nothing itself, and only one member retries a stream at a time', async () => {
    const group = 'test.consumer-retry-members';
    const members = await twoMembersRetrying(group, 'payment-ka', { firstFails: false });
    try {
      const retrying = members.retry('first');
      await members.inRetry.wait;
      // The other member leaves the stream to the one retrying it.
      expect(await members.retry('second')).toBe('requested');
      expect(members.handledBy.second).toEqual([]);
      members.release.open();
      expect(await retrying).toBe('applied');
      expect(members.handledBy.first).toEqual(['k0', 'k1']);
      expect(await listParkedStreams(dataSource, group)).toEqual([]);
    } finally {
      await members.close();
    }

    // An operator's request (202 `requested`) is run by a member that never parked anything itself.
    const idleGroup = `${group}-idle`;
    await append('payment-kb', ['k0', 'k1']);
    const handled: string[] = [];
    const { supervised: idle } = scriptedMember({ retryPollMs: 50, autoRetryAfterMs: 0 });
    const subscription = await idle.consume({
      group: idleGroup,
      topics: [TOPIC],
      handler: async (m) => {
        handled.push(label(m));
      },
    });
    try {
      await parkedByAnotherMember(idleGroup, 'payment-kb', 0);
      expect(await requestParkedStreamRetry(dataSource, idleGroup, 'payment-kb')).toBe(true);
      await eventually(
        () => listParkedStreams(dataSource, idleGroup),
        (p) => p.length === 0,
        'the requested retry run',
        POLL,
      );
      expect(handled).toEqual(['k0', 'k1']);
    } finally {
      await subscription.stop();
      await idle.close();
    }
  });

  it("hears a park by another member and an operator's retry request from another connection at once (LISTEN/NOTIFY), not at its next poll", async () => {
    if (database.kind === 'pglite') {
      // On PGlite (one shared session) nothing listens: the groups poll every second there.
      console.log('skipped on PGlite: one shared session, no LISTEN/NOTIFY');
      return;
    }
    const group = 'test.consumer-notified';
    await append('payment-kn', ['k0', 'k1']);
    // The member is another process (its own DataSource) polling hourly, notified or not: only a notification
    // can make it see the park and run the retry within the test.
    const other = await openDataSource({ url: database.url, migrations: [] });
    const handled: string[] = [];
    const { supervised } = scriptedMember(
      { retryPollMs: 3_600_000, notifiedRetryPollMs: 3_600_000, autoRetryAfterMs: 0 },
      other,
      true,
    );
    const subscription = await supervised.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        handled.push(label(m));
      },
    });
    const parkedSeen = () =>
      Promise.resolve(supervised.health.statuses().find((s) => s.group === group)?.parkedStreams);
    try {
      await eventually(parkedSeen, (n) => n === 0, 'the group started', POLL);
      await parkedByAnotherMember(group, 'payment-kn', 0);
      await eventually(parkedSeen, (n) => n === 1, "the other member's park counted", POLL);
      expect(await requestParkedStreamRetry(dataSource, group, 'payment-kn')).toBe(true);
      await eventually(
        () => listParkedStreams(dataSource, group),
        (p) => p.length === 0,
        'the requested retry run',
        POLL,
      );
      expect(handled).toEqual(['k0', 'k1']);
      await eventually(parkedSeen, (n) => n === 0, 'the release counted', POLL);
    } finally {
      await subscription.stop();
      await supervised.close();
      await other.destroy();
    }
  });

  it("reads every supervised group's parked rows in one statement per poll, not one per group", async () => {
    const statements: Array<{ sql: string; parameters: unknown[] }> = [];
    const counting = {
      query: (sql: string, parameters: unknown[]) => {
        statements.push({ sql, parameters });
        return dataSource.query(sql, parameters);
      },
    } as unknown as DataSource;
    const groups = ['test.consumer-poll-a', 'test.consumer-poll-b', 'test.consumer-poll-c'];
    const { supervised } = scriptedMember({ retryPollMs: 20, autoRetryAfterMs: 0 }, counting);
    const subscriptions = await Promise.all(
      groups.map((group) => supervised.consume({ group, topics: [TOPIC], handler: async () => undefined })),
    );
    const polls = (): Array<{ sql: string; parameters: unknown[] }> =>
      statements.filter((s) => /AS due/.test(s.sql) && !/UPDATE/.test(s.sql));
    try {
      // A poll begun before the last group subscribed read the groups there were (polling starts with the first),
      // and may send its statement after the subscribe returned: count from the first poll that knew all three
      // (polls run one after another, so every later one began after it).
      await eventually(
        async () => polls().some((poll) => (poll.parameters[0] as string[]).length === groups.length),
        (seen) => seen,
        'a poll of all three groups',
        POLL,
      );
      statements.length = 0;
      await eventually(
        async () => polls().length,
        (n) => n >= 3,
        'three polls',
        POLL,
      );
      // Idle groups: each poll read all three in one statement. (Once b has a due row, b sits out the polls that
      // come while it retries, so later polls may name two.)
      for (const poll of polls()) expect([...(poll.parameters[0] as string[])].sort()).toEqual(groups);
      // Parked by another member after these started: the polls bring it to its group.
      await parkedByAnotherMember('test.consumer-poll-b', 'payment-pb0', 0);
      const parked = (group: string): number | undefined =>
        supervised.health.statuses().find((s) => s.group === group)?.parkedStreams;
      await eventually(
        async () => parked('test.consumer-poll-b'),
        (n) => n === 1,
        'the row read',
        POLL,
      );
      expect(groups.map(parked)).toEqual([0, 1, 0]);
    } finally {
      for (const subscription of subscriptions) await subscription.stop();
      await supervised.close();
    }
  });

  it('keeps a stream it parked while the poll read the table: a later message of it waits though the read predates the park', async () => {
    const group = 'test.consumer-poll-stale';
    const readDone = gate();
    const applyRead = gate();
    const nextRead = gate();
    const end = gate();
    let reads = 0;
    const holding = {
      query: async (sql: string, parameters: unknown[]) => {
        if (!/AS due/.test(sql) || /UPDATE/.test(sql)) return dataSource.query(sql, parameters);
        reads++;
        if (reads > 1) {
          nextRead.open();
          await end.wait;
        }
        const rows: unknown = await dataSource.query(sql, parameters);
        readDone.open();
        await applyRead.wait;
        return rows;
      },
    } as unknown as DataSource;
    const { supervised, consumers } = scriptedMember(
      { retryPollMs: 20, autoRetryAfterMs: 0, isolateAfterFailures: 1 },
      holding,
    );
    const handled: string[] = [];
    const subscription = await supervised.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        if (label(m) === 'poison') throw new Error('the database refuses this draft');
        handled.push(m.id);
      },
    });
    const options = consumers[0];
    try {
      await readDone.wait;
      // Parked after the poll's read, before the poll applies it.
      await options?.handler(message(TOPIC, 'payment-xa', 0, 'poison'));
      applyRead.open();
      // The next poll begins once this one's rows were applied; it is held, so nothing fresher is read meanwhile.
      await nextRead.wait;
      await options?.handler(message(TOPIC, 'payment-xa', 1, 'x1'));
      expect(handled).toEqual([]);
      expect((await listParkedStreams(dataSource, group))[0]).toMatchObject({
        streamId: 'payment-xa',
        revision: 0,
        waitingRevision: 1,
      });
    } finally {
      end.open();
      await subscription.stop();
      await supervised.close();
    }
  });

  it("keeps the streams a rebalance's reload found while an older poll read was in flight: a later message of a stream another member parked waits", async () => {
    const group = 'test.consumer-poll-stale-assignment';
    const readDone = gate();
    const applyRead = gate();
    const nextRead = gate();
    const end = gate();
    let reads = 0;
    const holding = {
      query: async (sql: string, parameters: unknown[]) => {
        if (!/AS due/.test(sql) || /UPDATE/.test(sql)) return dataSource.query(sql, parameters);
        reads++;
        if (reads > 1) {
          nextRead.open();
          await end.wait;
        }
        const rows: unknown = await dataSource.query(sql, parameters);
        readDone.open();
        await applyRead.wait;
        return rows;
      },
    } as unknown as DataSource;
    const { supervised, consumers } = scriptedMember({ retryPollMs: 20, autoRetryAfterMs: 0 }, holding);
    const handled: string[] = [];
    const subscription = await supervised.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        handled.push(m.id);
      },
    });
    const options = consumers[0];
    try {
      await readDone.wait;
      // After the poll's read: another member parks the stream, then a rebalance gives this member its partition.
      await parkedByAnotherMember(group, 'payment-ya', 1);
      await options?.onAssigned?.();
      applyRead.open();
      await nextRead.wait;
      await options?.handler(message(TOPIC, 'payment-ya', 2, 'y2'));
      expect(handled).toEqual([]);
      expect((await listParkedStreams(dataSource, group))[0]).toMatchObject({
        streamId: 'payment-ya',
        revision: 1,
        waitingRevision: 2,
      });
    } finally {
      end.open();
      await subscription.stop();
      await supervised.close();
    }
  });

  it('holds no connection of the pool while retries run their handlers: groups retrying at once leave it to HTTP', async () => {
    const own = await openDataSource({ url: database.url, migrations: [] });
    // TypeORM's PostgresDriver keeps its pg Pool as `master`.
    const pool = (own.driver as unknown as { master: Pool }).master;
    await append('payment-ua', ['u0', 'u1']);
    const members = await Promise.all(
      ['a', 'b', 'c'].map((g) => memberHolding(`test.consumer-retry-pool-${g}`, 'payment-ua', 'u0', {}, own)),
    );
    try {
      const retrying = members.map((m) => m.retry());
      await Promise.all(members.map((m) => m.inRetry.wait));
      expect(pool.totalCount - pool.idleCount).toBe(0);
      for (const m of members) m.release.open();
      expect(await Promise.all(retrying)).toEqual(['applied', 'applied', 'applied']);
    } finally {
      for (const m of members) await m.close();
      await own.destroy();
    }
  });

  it("leaves a stream to another member's live claim (an operator's retry kept as a request), retries it once that claim expired (its member died), and renews its own claim while a handler call runs", async () => {
    const group = 'test.consumer-retry-claims';
    await append('payment-va', ['v0', 'v1']);
    const member = await memberHolding(group, 'payment-va', 'v0', { retryClaimMs: 900 });
    const claimUntil = async (): Promise<number> => {
      const rows: Array<{ until: Date | null }> = await dataSource.query(
        'SELECT retry_claimed_until AS until FROM parked_streams WHERE projection = $1',
        [group],
      );
      return rows[0]?.until?.getTime() ?? NaN;
    };
    try {
      await claimedBy(group, 'a crashed member', '1 hour');
      expect(await member.retry()).toBe('requested');
      expect(member.handled).toEqual([]);
      expect((await listParkedStreams(dataSource, group))[0]?.retryRequestedAt).not.toBeNull();

      await claimedBy(group, 'a crashed member', '-1 second');
      const retrying = member.retry();
      await member.inRetry.wait;
      const first = await claimUntil();
      // Renewed (each third of the claim) while the handler call runs.
      await eventually(claimUntil, (until) => until > first, 'the claim renewed', POLL);
      member.release.open();
      expect(await retrying).toBe('applied');
      expect(member.handled).toEqual(['v0', 'v1']);
      expect(await listParkedStreams(dataSource, group)).toEqual([]);
    } finally {
      await member.close();
    }
  });

  it("stops an operator's retry whose claim another member took over (this one stalled past it) after the current handler call, leaving the stream and the request to that member (`requested`)", async () => {
    const group = 'test.consumer-retry-taken-over';
    await append('payment-wa', ['w0', 'w1', 'w2']);
    const member = await memberHolding(group, 'payment-wa', 'w0');
    try {
      const retrying = member.retry();
      await member.inRetry.wait;
      await claimedBy(group, 'another member', '1 hour');
      member.release.open();
      expect(await retrying).toBe('requested');
      expect(member.handled).toEqual(['w0']);
      const rows: Array<{ revision: number; by: string; requested: boolean }> = await dataSource.query(
        `SELECT revision, retry_claimed_by AS by, retry_requested_at IS NOT NULL AS requested
           FROM parked_streams WHERE projection = $1`,
        [group],
      );
      expect(rows).toEqual([{ revision: 0, by: 'another member', requested: true }]);
    } finally {
      await member.close();
    }
  });

  it("stops an operator's retry in progress after its current handler call: the stream stays parked with the request on it (`requested`) and nothing is handled after stop", async () => {
    const group = 'test.consumer-retry-stop';
    await append('payment-sa', ['s0', 's1', 's2']);
    const member = await memberHolding(group, 'payment-sa', 's0');
    const retrying = member.retry();
    await member.inRetry.wait;
    const stopping = member.subscription.stop();
    member.release.open();
    await stopping;
    expect(await retrying).toBe('requested');
    expect(member.handled).toEqual(['s0']);
    const [row] = await listParkedStreams(dataSource, group);
    expect(row).toMatchObject({ streamId: 'payment-sa', revision: 0, attempts: 1 });
    expect(row?.retryRequestedAt).not.toBeNull();
    await member.close();
  });

  it("answers `applied`, not `requested`, to an operator's retry that waited behind another retry which released the stream", async () => {
    const group = 'test.consumer-retry-released-ahead';
    const stream = 'payment-rh';
    await append(stream, ['q0', 'q1']);
    // The member's table, telling the test once the second operator request is on the row (that retry then waits in
    // the member's queue behind the first).
    let requests = 0;
    const secondRecorded = gate();
    const watched = {
      query: async (sql: string, parameters?: unknown[]): Promise<unknown> => {
        const result: unknown = await dataSource.query(sql, parameters);
        if (sql.includes('SET retry_requested_at = GREATEST') && ++requests === 2) secondRecorded.open();
        return result;
      },
    } as unknown as DataSource;
    const member = await memberHolding(group, stream, 'q0', {}, watched);
    try {
      const first = member.retry();
      await member.inRetry.wait;
      // Asked again (a second click, the CLI) while the first retry runs: the row is there, the request recorded.
      const again = member.retry();
      await secondRecorded.wait;
      member.release.open();
      expect(await first).toBe('applied');
      expect(await listParkedStreams(dataSource, group)).toEqual([]);
      // Released by the retry ahead of it: no retry will run, so not `requested`; the stream it asked for is applied.
      expect(await again).toBe('applied');
      expect(member.handled).toEqual(['q0', 'q1']);
    } finally {
      await member.close();
    }
  });

  it("hands an operator's retry that its member cannot finish (it stops mid-retry) to the other member: answered `requested`, kept on the row, and run there in order", async () => {
    const group = 'test.consumer-retry-handed-over';
    const members = await twoMembersRetrying(group, 'payment-ho', { firstFails: false, secondPollMs: 50 });
    try {
      const retrying = members.retry('first');
      await members.inRetry.wait;
      const stopping = members.stop('first');
      members.release.open();
      await stopping;
      expect(await retrying).toBe('requested');
      expect(members.handledBy.first).toEqual(['k0']);
      // Not due by itself (automatic retries are off, nothing failed): only the kept request makes the second run it.
      await eventually(
        () => listParkedStreams(dataSource, group),
        (p) => p.length === 0,
        'the other member running the request',
        POLL,
      );
      expect(members.handledBy.second).toEqual(['k0', 'k1']);
    } finally {
      await members.close();
    }
  });

  it('puts off a retry whose messages were handled but whose row could not be deleted: the row moves to the newest message handled, the request is served and the schedule backs off, so it is not retried at every poll; if even that cannot be written, the claim is kept until it expires', async () => {
    const group = 'test.consumer-retry-release-fails';
    const stream = 'payment-rf';
    await append(stream, ['r0', 'r1']);
    const member = await memberHolding(group, stream, 'none', { autoRetryAfterMs: 60_000 });
    const row = async () =>
      (
        await dataSource.query(
          `SELECT revision, event_id, attempts, error, retry_requested_at IS NOT NULL AS requested,
                  retry_claimed_by IS NOT NULL AND retry_claimed_until > now() AS claimed, ${RETRY_DUE} AS due
             FROM parked_streams WHERE projection = $1`,
          [group, 60, 1800],
        )
      )[0];
    // The real statement fails in Postgres: a trigger refuses this group's DELETE (and, below, its back-off).
    await dataSource.query(`CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql
      AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$`);
    await dataSource.query(`CREATE TRIGGER test_refuse_release BEFORE DELETE ON parked_streams FOR EACH ROW
      WHEN (OLD.projection = '${group}') EXECUTE FUNCTION test_refuse()`);
    try {
      // Also asked from another process: that request is served by this retry too.
      expect(await requestParkedStreamRetry(dataSource, group, stream)).toBe(true);
      expect(await member.retry()).toBe('still_parked');
      expect(member.handled).toEqual(['r0', 'r1']);
      expect(await row()).toMatchObject({
        revision: 1,
        event_id: `${stream}:r1`,
        attempts: 2,
        requested: false,
        claimed: false,
        due: false,
      });
      expect((await row()).error).toMatch(/releasing the retried stream failed: .*refused by the test/);

      // The back-off cannot be written either: the retry fails and its claim stays until it expires.
      await dataSource.query(`CREATE TRIGGER test_refuse_backoff BEFORE UPDATE ON parked_streams FOR EACH ROW
        WHEN (OLD.projection = '${group}' AND NEW.attempts <> OLD.attempts) EXECUTE FUNCTION test_refuse()`);
      await expect(member.retry()).rejects.toThrow(/refused by the test/);
      expect(member.handled).toEqual(['r0', 'r1', 'r1']);
      expect(await row()).toMatchObject({ revision: 1, attempts: 2, claimed: true });
      expect(await member.retry()).toBe('requested');
      expect(member.handled).toEqual(['r0', 'r1', 'r1']);
    } finally {
      await dataSource.query('DROP TRIGGER IF EXISTS test_refuse_release ON parked_streams');
      await dataSource.query('DROP TRIGGER IF EXISTS test_refuse_backoff ON parked_streams');
      await dataSource.query('DROP FUNCTION IF EXISTS test_refuse()');
    }
    try {
      // The claim expired (its member gone): the next retry hands only the newest handled message again and releases.
      await claimedBy(group, 'a crashed member', '-1 second');
      expect(await member.retry()).toBe('applied');
      expect(member.handled).toEqual(['r0', 'r1', 'r1', 'r1']);
      expect(await listParkedStreams(dataSource, group)).toEqual([]);
    } finally {
      await member.close();
    }
  });

  it('never parks a message whose handler fails because a chain node is down (ethers SERVER_ERROR): retried, shown as stalled, handled once the node is back', async () => {
    const group = 'test.consumer-dependency-outage';
    const handled: string[] = [];
    const errors: unknown[] = [];
    let nodeDown = true;
    const subscription = await bus.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        if (m.key === 'payment-da' && nodeDown)
          throw makeError('server response 503 Service Unavailable', 'SERVER_ERROR', {
            request: undefined as never,
            response: undefined as never,
          });
        handled.push(m.id);
      },
      onError: (error) => errors.push(error),
    });
    try {
      await append('payment-da', ['d0', 'd1']);
      await failedPastIsolatePassUnparked(errors, group);
      expect(bus.health.readiness().stalled).toEqual([
        expect.stringMatching(
          new RegExp(`^${group} stalled: \\d+ failures in a row: Error: server response 503`),
        ),
      ]);
      nodeDown = false;
      await subscription.caughtUp();
      expect(handled.filter((h) => h.startsWith('payment-da:'))).toEqual(['payment-da:d0', 'payment-da:d1']);
      expect(await listParkedStreams(dataSource, group)).toEqual([]);
      expect(bus.health.readiness().stalled).toEqual([]);
    } finally {
      await subscription.stop();
    }
  });

  it('retries a message whose dependency the consumer tells unavailable (OutageGrace) in place and never parks it within its grace, and parks it once past it while the other streams go on', async () => {
    const group = 'test.consumer-outage-grace';
    const grace = new OutageGrace(60_000);
    let now = new Date('2026-11-24T07:00:00.000Z');
    const handled: string[] = [];
    const errors: unknown[] = [];
    const subscription = await bus.consume({
      group,
      topics: [TOPIC],
      handler: async (m) => {
        if (m.key === 'payment-og') throw grace.unavailable(m.id, 'screening unreachable', now);
        handled.push(m.id);
      },
      onError: (error) => errors.push(error),
    });
    try {
      await append('payment-og', ['g0']);
      await failedPastIsolatePassUnparked(errors, group);
      now = new Date(now.getTime() + 60_000);
      await eventually(
        async () => (await listParkedStreams(dataSource, group)).map((r) => r.streamId),
        (parked) => parked.includes('payment-og'),
        'parked past the grace',
        POLL,
      );
      await append('payment-oh', ['h0']);
      await subscription.caughtUp();
      // Streams of the other tests in the shared log are handled too; of these two only the unparked one is.
      expect(handled.filter((h) => h.startsWith('payment-o'))).toEqual(['payment-oh:h0']);
    } finally {
      await subscription.stop();
    }
  });

  describe('with an isolation key finer than the stream (one stream carrying many subjects)', () => {
    /** Each message names its subject; `subject: null` stands for a message that cannot be attributed. */
    const appendSubjects = (stream: string, items: Array<[label: string, subject: string | null]>) =>
      store.appendToStream(
        stream,
        items.map(([l, subject]) => ({
          id: `${stream}:${l}`,
          type: 'Observed',
          data: { label: l, subject },
        })),
      );
    const subjectKey = (m: BusMessage): string | undefined => {
      const subject = (m.data as { subject: string | null }).subject;
      return subject === null ? undefined : `${m.key}:${subject}`;
    };

    it("parks only the failing subject's key: the stream's other subjects go on, and the key's later messages wait and run in order after a retry", async () => {
      const group = 'test.consumer-key-parking';
      const stream = 'chain-test:keys';
      const handled: string[] = [];
      let refused = true;
      const subscription = await bus.consume({
        group,
        topics: [CHAIN_TOPIC],
        isolationKey: subjectKey,
        handler: async (m) => {
          if (label(m) === 'a-poison' && refused) throw new Error('payment A refuses this observation');
          handled.push(label(m));
        },
      });
      try {
        await appendSubjects(stream, [
          ['a0', 'A'],
          ['a-poison', 'A'],
          ['b0', 'B'],
          ['a2', 'A'],
          ['b1', 'B'],
          ['a-retract-poison', 'A'],
        ]);
        await subscription.caughtUp();
        // B, on the same stream after A's poison, is handled; A's later messages wait.
        expect(handled).toEqual(['a0', 'b0', 'b1']);
        const [parked, ...others] = await listParkedStreams(dataSource, group);
        expect(others).toEqual([]);
        expect(parked).toMatchObject({
          streamId: `${stream}:A`,
          sourceStreamId: stream,
          revision: 1,
          eventId: `${stream}:a-poison`,
          waitingRevision: 5,
        });

        await appendSubjects(stream, [
          ['b2', 'B'],
          ['a3', 'A'],
        ]);
        await subscription.caughtUp();
        expect(handled).toEqual(['a0', 'b0', 'b1', 'b2']);

        // Still refused: the key stays parked, nothing of A handled.
        expect(await bus.consumer(group)?.retry(`${stream}:A`)).toBe('still_parked');
        expect(handled).toEqual(['a0', 'b0', 'b1', 'b2']);

        refused = false;
        expect(await bus.consumer(group)?.retry(`${stream}:A`)).toBe('applied');
        expect(handled).toEqual(['a0', 'b0', 'b1', 'b2', 'a-poison', 'a2', 'a-retract-poison', 'a3']);
        expect(await listParkedStreams(dataSource, group)).toEqual([]);

        await appendSubjects(stream, [['a4', 'A']]);
        await subscription.caughtUp();
        expect(handled.slice(-1)).toEqual(['a4']);
      } finally {
        await subscription.stop();
      }
    });

    it("holds a message it cannot attribute while a key of its stream is parked (it may be that key's), then handles it and what follows in order", async () => {
      const group = 'test.consumer-key-unattributed';
      const stream = 'chain-test:unattributed';
      const handled: string[] = [];
      let refused = true;
      const subscription = await bus.consume({
        group,
        topics: [CHAIN_TOPIC],
        isolationKey: subjectKey,
        handler: async (m) => {
          if (m.key !== stream) return;
          if (label(m) === 'a-poison' && refused) throw new Error('payment A refuses this observation');
          handled.push(label(m));
        },
      });
      try {
        await appendSubjects(stream, [
          ['a-poison', 'A'],
          ['b0', 'B'],
          ['unknown', null],
          ['b1', 'B'],
        ]);
        await eventually(
          async () => bus.health.statuses().find((s) => s.group === group)?.lastError,
          (e) => e?.includes('UnattributedMessageWaits') === true,
          'the unattributed message waiting',
          POLL,
        );
        // Its delivery keeps failing on it: neither it nor what follows it is handled.
        expect(handled).toEqual(['b0']);
        expect((await listParkedStreams(dataSource, group)).map((p) => p.streamId)).toEqual([`${stream}:A`]);

        refused = false;
        expect(await bus.consumer(group)?.retry(`${stream}:A`)).toBe('applied');
        await subscription.caughtUp();
        expect(handled).toEqual(['b0', 'a-poison', 'unknown', 'b1']);
      } finally {
        await subscription.stop();
      }
    });
    it('parks the whole stream of a message it cannot attribute that keeps failing (its keys wait behind it, shown in parked_streams), and a retry handles the stream in order', async () => {
      const group = 'test.consumer-key-unattributed-poison';
      const stream = 'chain-test:unattributed-poison';
      const handled: string[] = [];
      let refused = true;
      const subscription = await bus.consume({
        group,
        topics: [CHAIN_TOPIC],
        isolationKey: subjectKey,
        handler: async (m) => {
          if (m.key !== stream) return;
          if (label(m) === 'unknown' && refused) throw new Error('no consumer can handle this observation');
          handled.push(label(m));
        },
      });
      try {
        await appendSubjects(stream, [
          ['unknown', null],
          ['a0', 'A'],
          ['b0', 'B'],
        ]);
        await eventually(
          () => listParkedStreams(dataSource, group),
          (rows) => rows.some((p) => p.streamId === stream),
          'the stream parked',
          POLL,
        );
        await subscription.caughtUp();
        expect(handled).toEqual([]);

        refused = false;
        expect(await bus.consumer(group)?.retry(stream)).toBe('applied');
        await subscription.caughtUp();
        expect(handled).toEqual(['unknown', 'a0', 'b0']);
        expect(await listParkedStreams(dataSource, group)).toEqual([]);
      } finally {
        await subscription.stop();
      }
    });
    it('puts off a retry that stops before a message it cannot attribute while a later message of its key waits: the request is served and the schedule backs off, not retried at every poll', async () => {
      const group = 'test.consumer-key-unattributed-stop';
      const stream = 'chain-test:unattributed-stop';
      const key = `${stream}:A`;
      await appendSubjects(stream, [
        ['a0', 'A'],
        ['u1', null],
        ['a2', 'A'],
      ]);
      // Not expected of the live path (it holds u1 and what follows): a2 recorded as waiting behind the key anyway.
      await dataSource.query(
        `INSERT INTO parked_streams
           (projection, stream_id, source_stream_id, event_id, revision, event_type, error, waiting_revision)
         VALUES ($1, $2, $3, $4, 0, 'Observed', 'Error: refused', 2)`,
        [group, key, stream, `${stream}:a0`],
      );
      const handled: string[] = [];
      const { supervised } = scriptedMember({ retryPollMs: 60_000, autoRetryAfterMs: 60_000 });
      const subscription = await supervised.consume({
        group,
        topics: [CHAIN_TOPIC],
        isolationKey: subjectKey,
        handler: async (m) => {
          handled.push(label(m));
        },
      });
      try {
        expect(await requestParkedStreamRetry(dataSource, group, key)).toBe(true);
        expect(await supervised.consumer(group)?.retry(key)).toBe('still_parked');
        expect(handled).toEqual(['a0']);
        const rows: unknown[] = await dataSource.query(
          `SELECT revision, attempts, retry_requested_at IS NOT NULL AS requested, ${RETRY_DUE} AS due
             FROM parked_streams WHERE projection = $1`,
          [group, 60, 1800],
        );
        expect(rows).toEqual([{ revision: 0, attempts: 2, requested: false, due: false }]);
        expect((await listParkedStreams(dataSource, group))[0]?.error).toMatch(/cannot attribute/);
      } finally {
        await subscription.stop();
        await supervised.close();
      }
    });
    it('keeps a whole stream parked per stream (by the version before the isolation key, or a member without it) holding all of that stream, and its retry handles every message of it in order', async () => {
      const group = 'test.consumer-key-stream-row';
      const stream = 'chain-test:upgrade';
      const handled: string[] = [];
      await appendSubjects(stream, [
        ['a0', 'A'],
        ['a1', 'A'],
        ['b0', 'B'],
        ['unknown', null],
        ['a2', 'A'],
      ]);
      await parkedByAnotherMember(group, stream, 0);
      const subscription = await bus.consume({
        group,
        topics: [CHAIN_TOPIC],
        isolationKey: subjectKey,
        handler: async (m) => {
          if (m.key === stream) handled.push(label(m));
        },
      });
      try {
        await subscription.caughtUp();
        expect(handled).toEqual([]);
        expect(await listParkedStreams(dataSource, group)).toEqual([
          expect.objectContaining({
            streamId: stream,
            sourceStreamId: null,
            revision: 0,
            waitingRevision: 4,
          }),
        ]);

        expect(await bus.consumer(group)?.retry(stream)).toBe('applied');
        expect(handled).toEqual(['a0', 'a1', 'b0', 'unknown', 'a2']);
        expect(await listParkedStreams(dataSource, group)).toEqual([]);
      } finally {
        await subscription.stop();
      }
    });
  });

  describe("a chain's observations, keyed per watched address (chainObservationIsolationKey)", () => {
    const DEPOSIT_A = '0xA000000000000000000000000000000000000001';
    const DEPOSIT_B = '0xB000000000000000000000000000000000000002';
    const MANAGER_1 = '0x1000000000000000000000000000000000000003';
    const MANAGER_2 = '0x2000000000000000000000000000000000000004';
    const TOKEN = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
    type Observation = readonly [label: string, type: string, data: Record<string, unknown>];
    const transfer = (l: string, to: string): Observation => [
      l,
      'Erc20TransferObserved.v1',
      { to, contract: TOKEN, amount: '100' },
    ];
    const emitted = (l: string, type: string, contract: string, event: string): Observation => [
      l,
      type,
      { contract, event, args: {} },
    ];
    const retraction = (l: string, stream: string, of: string, address: string): Observation => [
      l,
      'ObservationRetracted.v1',
      { observationId: `${stream}:${of}`, reason: 'reorg', address },
    ];
    const observe = (stream: string, items: readonly Observation[]): Promise<unknown> =>
      store.appendToStream(
        stream,
        items.map(([l, type, data]) => ({ id: `${stream}:${l}`, type, data: { ...data, label: l } })),
      );
    /** A consumer of the chain topic that cannot handle the observations named `poison` while `refused` holds. */
    const chainConsumer = async (group: string, stream: string, poison: readonly string[]) => {
      const handled: string[] = [];
      const state = { refused: true };
      const subscription = await bus.consume({
        group,
        topics: [CHAIN_TOPIC],
        isolationKey: chainObservationIsolationKey,
        handler: async (m) => {
          if (m.key !== stream) return;
          if (state.refused && poison.includes(label(m))) throw new Error(`cannot handle ${label(m)}`);
          handled.push(label(m));
        },
      });
      return { handled, state, subscription };
    };

    it("parks only payment A's deposit address when its observation cannot be handled: payment B on the same chain proceeds, and A's later observations and the retraction of the parked one wait and run in order after a retry", async () => {
      const group = 'test.chain-deposits';
      const stream = 'chain-eip155:900101';
      const { handled, state, subscription } = await chainConsumer(group, stream, ['a-funded']);
      try {
        await observe(stream, [
          transfer('a-funded', DEPOSIT_A),
          transfer('b-funded', DEPOSIT_B),
          emitted('a-captured', 'PaymentDepositEventObserved.v1', DEPOSIT_A, 'PaymentCaptured'),
          retraction('a-funded-retracted', stream, 'a-funded', DEPOSIT_A.toLowerCase()),
          transfer('b-second', DEPOSIT_B),
          transfer('a-funded-again', DEPOSIT_A),
        ]);
        await subscription.caughtUp();
        expect(handled).toEqual(['b-funded', 'b-second']);
        expect(await listParkedStreams(dataSource, group)).toEqual([
          expect.objectContaining({
            streamId: `${stream}:${DEPOSIT_A.toLowerCase()}`,
            sourceStreamId: stream,
            revision: 0,
            eventType: 'Erc20TransferObserved.v1',
            waitingRevision: 5,
          }),
        ]);

        // The operator's way: the admin route marks the row, the owning consumer runs the retry.
        state.refused = false;
        expect(
          await requestParkedStreamRetry(dataSource, group, `${stream}:${DEPOSIT_A.toLowerCase()}`),
        ).toBe(true);
        await eventually(
          () => listParkedStreams(dataSource, group),
          (p) => p.length === 0,
          "A's address released",
          POLL,
        );
        expect(handled).toEqual([
          'b-funded',
          'b-second',
          'a-funded',
          'a-captured',
          'a-funded-retracted',
          'a-funded-again',
        ]);
      } finally {
        await subscription.stop();
      }
    });

    it("parks only the subscription manager whose event cannot be handled: another merchant's manager on the same chain proceeds, and the parked one's later events and retraction run in order after a retry", async () => {
      const group = 'test.chain-managers';
      const stream = 'chain-eip155:900102';
      const managerEvent = 'SubscriptionManagerEventObserved.v1';
      const { handled, state, subscription } = await chainConsumer(group, stream, ['m1-charged']);
      try {
        await observe(stream, [
          emitted('m1-created', managerEvent, MANAGER_1, 'SubscriptionCreated'),
          emitted('m1-charged', managerEvent, MANAGER_1, 'SubscriptionCharged'),
          emitted('m2-created', managerEvent, MANAGER_2, 'SubscriptionCreated'),
          emitted('m1-cancelled', managerEvent, MANAGER_1, 'SubscriptionCancelled'),
          emitted('m2-charged', managerEvent, MANAGER_2, 'SubscriptionCharged'),
          retraction('m1-charged-retracted', stream, 'm1-charged', MANAGER_1),
        ]);
        await subscription.caughtUp();
        expect(handled).toEqual(['m1-created', 'm2-created', 'm2-charged']);
        const key = `${stream}:${MANAGER_1.toLowerCase()}`;
        expect(
          (await listParkedStreams(dataSource, group)).map((p) => [p.streamId, p.waitingRevision]),
        ).toEqual([[key, 5]]);

        expect(await bus.consumer(group)?.retry(key)).toBe('still_parked');
        expect(handled).toEqual(['m1-created', 'm2-created', 'm2-charged']);
        state.refused = false;
        expect(await bus.consumer(group)?.retry(key)).toBe('applied');
        expect(handled).toEqual([
          'm1-created',
          'm2-created',
          'm2-charged',
          'm1-charged',
          'm1-cancelled',
          'm1-charged-retracted',
        ]);
      } finally {
        await subscription.stop();
      }
    });
  });

  it("shows a group whose subscription never reaches its backlog (catch-up reads failing) as stalled, with a growing lag (a projection's last-lag gauge too)", async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const silent: EventBus = {
      publish: async () => undefined,
      close: async () => undefined,
      // The handler is never called and caughtUp never answers: what failing catch-up reads look like from here.
      consume: async (): Promise<BusSubscription> => ({
        caughtUp: () => new Promise<void>(() => undefined),
        stop: async () => undefined,
      }),
    };
    const supervised = new SupervisedEventBus(silent, {
      logger: { error: () => undefined, warn: () => undefined, log: () => undefined },
      settings: { clock: () => now, probeIntervalMs: 10, stalledAfterMs: 60_000 },
    });
    const subscription = await supervised.consume({
      group: 'test.projection-unreachable',
      topics: [TOPIC],
      handler: async () => undefined,
      isolatesItself: true,
    });
    const projectionLag = async (): Promise<string | undefined> =>
      (await register.metrics())
        .split('\n')
        .find((l) =>
          l.startsWith('stablepay_projection_last_lag_seconds{projection="test.projection-unreachable"}'),
        );
    try {
      await eventually(
        async () => supervised.health.statuses()[0]?.pending,
        (p) => p === true,
        'a probe',
        POLL,
      );
      expect(supervised.health.readiness().stalled).toEqual([]);
      now += 59_000;
      expect(supervised.health.statuses()[0]?.stalled).toBe(false);
      now += 2_000;
      const [status] = supervised.health.statuses();
      expect(status).toMatchObject({ stalled: true, lagSeconds: 61 });
      expect(status?.reason).toMatch(/no progress for 61 s with work pending: the subscription not reaching/);
      expect(await projectionLag()).toMatch(/ 61$/);
      now += 30_000;
      expect(supervised.health.statuses()[0]?.lagSeconds).toBe(91);
      expect(await projectionLag()).toMatch(/ 91$/);
      expect(await register.metrics()).toContain(
        'stablepay_consumer_lag_seconds{group="test.projection-unreachable"} 91',
      );
    } finally {
      await subscription.stop();
      await supervised.close();
    }
  });
});
