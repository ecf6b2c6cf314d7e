import { systemClock, type Clock } from '@stablepay/util';
import {
  streamCategory,
  type AppendResult,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StoreSubscription,
  type SubscribeToAllOptions,
} from '../event-store.port';
import { startCatchUpSubscription, type CatchUpSettings } from '../catch-up-subscription';
import { assertAppendable, assertReadOptions, checkExpectedRevision } from '../append-rules';

/**
 * The storage behind InMemoryEventStore instances. Several store instances over one log stand for several
 * processes (or a restart) sharing a database: they see the same events and the same checkpoints.
 */
export class InMemoryEventLog {
  readonly events: RecordedEvent[] = [];
  readonly streams = new Map<string, RecordedEvent[]>();
  readonly ids = new Map<string, RecordedEvent>();
  readonly checkpoints = new Map<string, bigint>();
  readonly listeners = new Set<() => void>();
}

/**
 * EventStore in memory, for unit tests of command handlers, projections and process managers. It passes the
 * same conformance suite as the Postgres and EventStoreDB adapters; nothing survives the process.
 */
export class InMemoryEventStore implements EventStore {
  private readonly subscriptions = new Set<StoreSubscription>();
  private readonly clock: Clock;

  constructor(
    readonly log: InMemoryEventLog = new InMemoryEventLog(),
    private readonly options: {
      readonly clock?: Clock;
      readonly subscriptions?: Omit<CatchUpSettings, 'onAppend'>;
    } = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  async appendToStream(
    streamId: string,
    events: readonly NewEvent[],
    options: { readonly expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    assertAppendable(streamId, events, expected);
    const stream = this.log.streams.get(streamId) ?? [];
    const retried = this.retriedAppendResult(streamId, stream, events, expected);
    if (retried) return retried;
    checkExpectedRevision(streamId, expected, stream.length - 1);
    const duplicate = events.find((e) => this.log.ids.has(e.id));
    if (duplicate)
      throw new Error(`stream ${streamId}: event id ${duplicate.id} is already stored elsewhere`);
    const recordedAt = this.clock.now();
    const recorded = events.map((event, i): RecordedEvent => ({
      id: event.id,
      streamId,
      type: event.type,
      data: structuredClone(event.data),
      metadata: structuredClone(event.metadata ?? {}),
      revision: stream.length + i,
      globalPosition: BigInt(this.log.events.length + i + 1),
      recordedAt,
    }));
    this.log.events.push(...recorded);
    stream.push(...recorded);
    this.log.streams.set(streamId, stream);
    for (const event of recorded) this.log.ids.set(event.id, event);
    for (const listener of this.log.listeners) listener();
    const last = recorded[recorded.length - 1];
    if (!last) throw new Error('unreachable: an append has at least one event');
    return { nextExpectedRevision: last.revision, lastGlobalPosition: last.globalPosition };
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    assertReadOptions(options);
    const stream = this.log.streams.get(streamId) ?? [];
    const limit = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    if (options.direction === 'backwards') {
      const from = options.fromRevision ?? stream.length - 1;
      return stream
        .filter((e) => e.revision <= from)
        .reverse()
        .slice(0, limit);
    }
    const from = options.fromRevision ?? 0;
    return stream.filter((e) => e.revision >= from).slice(0, limit);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    assertReadOptions(options);
    const after = options.after ?? 0n;
    const categories = options.categories ? new Set(options.categories) : undefined;
    const out: RecordedEvent[] = [];
    const limit = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    for (let i = Number(after); i < this.log.events.length && out.length < limit; i++) {
      const event = this.log.events[i];
      if (event && (!categories || categories.has(streamCategory(event.streamId)))) out.push(event);
    }
    return out;
  }

  async headPosition(): Promise<bigint> {
    return BigInt(this.log.events.length);
  }

  async subscribeToAll(options: SubscribeToAllOptions): Promise<StoreSubscription> {
    const log = this.log;
    const subscription = await startCatchUpSubscription(
      this,
      {
        load: async (id) => log.checkpoints.get(id) ?? 0n,
        save: async (id, position) => {
          if (position > (log.checkpoints.get(id) ?? 0n)) log.checkpoints.set(id, position);
        },
      },
      options,
      {
        pollIntervalMs: 20,
        ...this.options.subscriptions,
        onAppend: (wake) => {
          log.listeners.add(wake);
          return () => log.listeners.delete(wake);
        },
      },
    );
    this.subscriptions.add(subscription);
    return {
      caughtUp: () => subscription.caughtUp(),
      stop: async () => {
        this.subscriptions.delete(subscription);
        await subscription.stop();
      },
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    this.subscriptions.clear();
  }

  private retriedAppendResult(
    streamId: string,
    stream: readonly RecordedEvent[],
    events: readonly NewEvent[],
    expected: ExpectedRevision,
  ): AppendResult | undefined {
    const firstStored = this.log.ids.get(events[0]?.id ?? '');
    if (!firstStored || firstStored.streamId !== streamId) return undefined;
    const first = firstStored.revision;
    const placeMatches =
      typeof expected === 'number' ? first === expected + 1 : expected === 'no_stream' ? first === 0 : true;
    const same = events.every((e, i) => stream[first + i]?.id === e.id);
    const last = stream[first + events.length - 1];
    return placeMatches && same && last
      ? { nextExpectedRevision: last.revision, lastGlobalPosition: last.globalPosition, retried: true }
      : undefined;
  }
}
