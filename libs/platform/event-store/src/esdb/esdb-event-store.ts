import { createHash } from 'node:crypto';
import {
  ANY,
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  StreamNotFoundError,
  WrongExpectedVersionError,
  jsonEvent,
  type AllStreamResolvedEvent,
  type AppendExpectedRevision,
  type JSONType,
  type ReadPosition,
  type ResolvedEvent,
} from '@eventstore/db-client';
import {
  streamCategory,
  WrongExpectedRevisionError,
  type AppendResult,
  type EventMetadata,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StoreSubscription,
  type SubscribeToAllOptions,
} from '../event-store.port';
import {
  startCatchUpSubscription,
  type CatchUpSettings,
  type CheckpointStore,
} from '../catch-up-subscription';
import { assertAppendable, assertReadOptions } from '../append-rules';

/**
 * Category of the streams holding subscription checkpoints (`_checkpoint-<subscriptionId>`). Categories that
 * start with '_' are the store's own bookkeeping: readAll and subscriptions never return them.
 */
export const ESDB_CHECKPOINT_CATEGORY = '_checkpoint';

/** Metadata key carrying our event id: EventStoreDB ids must be UUIDs, ours are any string. */
const EVENT_ID_KEY = 'stablepayEventId';

/** Records read per $all page; the category filter runs on the client (this client's readAll has no filter). */
const ALL_PAGE_SIZE = 512;
/** How far back headPosition looks for the newest non-system event before settling for the newest record. */
const HEAD_SCAN_LIMIT = 2048;
const HEAD_PAGE_SIZE = 32;

export interface EsdbEventStoreOptions {
  /** e.g. `esdb://localhost:2113?tls=false`. */
  readonly connectionString: string;
  readonly subscriptions?: Omit<CatchUpSettings, 'onAppend'>;
}

export async function createEsdbEventStore(options: EsdbEventStoreOptions): Promise<EsdbEventStore> {
  const client = EventStoreDBClient.connectionString(options.connectionString);
  const store = new EsdbEventStore(client, { ...options, ownsClient: true });
  try {
    await store.headPosition(); // fail fast on a wrong URL instead of on the first command
  } catch (error) {
    await client.dispose();
    throw error;
  }
  return store;
}

/**
 * EventStore on EventStoreDB / KurrentDB (the distributed deployment).
 *
 * - Global position = the event's commit position in $all. The server writes through one log, so positions
 *   grow in commit order by construction. Reading "after P" starts at {commit: P, prepare: P}, which relies on
 *   commit == prepare for events written through gRPC appends (true since EventStoreDB 20.6); the boundary
 *   event is dropped client-side because a $all read from a position includes it. Positions on events read
 *   from a single stream need server 22.6 or later.
 * - Event ids: EventStoreDB wants UUIDs, so an id that is not one is mapped to a name-based UUID (v5) and the
 *   original travels in the metadata; the mapping is deterministic, so a retried append keeps the same UUIDs
 *   and the server's own idempotency applies. An append whose events already sit at the targeted place is
 *   answered with the original result, like the Postgres adapter.
 * - Checkpoints: one stream per subscription, `_checkpoint-<subscriptionId>`, holding `CheckpointStored`
 *   events (the newest wins; `$maxCount` keeps the last few).
 * - Subscriptions: the adapter-independent catch-up poller over readAll, so both adapters share retry,
 *   checkpoint and caughtUp semantics.
 */
export class EsdbEventStore implements EventStore {
  private readonly subscriptions = new Set<StoreSubscription>();
  private readonly checkpoints: CheckpointStore;
  private closed = false;

  constructor(
    private readonly client: EventStoreDBClient,
    private readonly options: {
      readonly ownsClient?: boolean;
      readonly subscriptions?: Omit<CatchUpSettings, 'onAppend'>;
    } = {},
  ) {
    this.checkpoints = new EsdbCheckpointStore(client);
  }

  async appendToStream(
    streamId: string,
    events: readonly NewEvent[],
    options: { readonly expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    assertAppendable(streamId, events, expected);
    try {
      const result = await this.client.appendToStream(streamId, events.map(toEventData), {
        expectedRevision: toEsdbExpectedRevision(expected),
      });
      const nextExpectedRevision = Number(result.nextExpectedRevision);
      const commit = result.position?.commit;
      // An append the server recognised as a retry comes back without a position: read the original one.
      if (commit !== undefined && commit >= 0n) return { nextExpectedRevision, lastGlobalPosition: commit };
      const lastGlobalPosition = await this.positionOf(streamId, nextExpectedRevision);
      return { nextExpectedRevision, lastGlobalPosition, retried: true };
    } catch (error) {
      if (!(error instanceof WrongExpectedVersionError)) throw error;
      const retried = await this.retriedAppendResult(streamId, events, expected);
      if (retried) return retried;
      const actual = error.actualVersion === NO_STREAM ? 'no_stream' : Number(error.actualVersion);
      throw new WrongExpectedRevisionError(streamId, expected, actual);
    }
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    assertReadOptions(options);
    if (options.maxCount === 0) return [];
    const backwards = options.direction === 'backwards';
    const read = this.client.readStream(streamId, {
      direction: backwards ? BACKWARDS : FORWARDS,
      fromRevision:
        options.fromRevision !== undefined ? BigInt(options.fromRevision) : backwards ? END : START,
      ...(options.maxCount !== undefined ? { maxCount: options.maxCount } : {}),
    });
    const out: RecordedEvent[] = [];
    try {
      for await (const resolved of read) {
        const event = fromResolved(resolved);
        if (event) out.push(event);
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw error;
    }
    return out;
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    assertReadOptions(options);
    const wanted = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    const categories = options.categories ? new Set(options.categories) : undefined;
    const out: RecordedEvent[] = [];
    let after = options.after ?? 0n;
    while (out.length < wanted) {
      const page = await this.readAllPage(after);
      for (const resolved of page) {
        const event = fromResolved(resolved);
        if (!event || event.globalPosition <= after) continue;
        if (isBookkeeping(event.streamId)) continue;
        if (categories && !categories.has(streamCategory(event.streamId))) continue;
        out.push(event);
        if (out.length >= wanted) break;
      }
      const lastRaw = page[page.length - 1]?.event?.position.commit;
      if (page.length < ALL_PAGE_SIZE || lastRaw === undefined || lastRaw <= after) break;
      after = lastRaw;
    }
    return out;
  }

  /**
   * The newest user event's position. $all also holds system records ($stats, $metadata...), so this reads
   * backwards in small pages, each consumed whole, until it meets one; after HEAD_SCAN_LIMIT records of
   * bookkeeping it settles for the newest record's position, which is just as good a catch-up target.
   */
  async headPosition(): Promise<bigint> {
    let newest: bigint | undefined;
    let oldest: bigint | undefined;
    let from: ReadPosition = END;
    for (let scanned = 0; scanned < HEAD_SCAN_LIMIT;) {
      const page: AllStreamResolvedEvent[] = [];
      for await (const resolved of this.client.readAll({
        direction: BACKWARDS,
        fromPosition: from,
        maxCount: HEAD_PAGE_SIZE,
      })) {
        page.push(resolved);
      }
      const oldestBefore = oldest;
      for (const { event } of page) {
        if (!event) continue;
        const position = event.position.commit;
        if (oldest !== undefined && position >= oldest) continue; // the page boundary, already seen
        newest ??= position;
        oldest = position;
        if (!isBookkeeping(event.streamId) && !event.type.startsWith('$')) return position;
      }
      scanned += page.length;
      if (page.length < HEAD_PAGE_SIZE || oldest === undefined || oldest === oldestBefore) break;
      from = { commit: oldest, prepare: oldest };
    }
    return newest ?? 0n;
  }

  async subscribeToAll(options: SubscribeToAllOptions): Promise<StoreSubscription> {
    if (this.closed) throw new Error('event store is closed');
    const subscription = await startCatchUpSubscription(
      this,
      this.checkpoints,
      options,
      this.options.subscriptions,
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
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    this.subscriptions.clear();
    if (this.options.ownsClient) await this.client.dispose();
  }

  private async readAllPage(after: bigint): Promise<AllStreamResolvedEvent[]> {
    const fromPosition: ReadPosition = after > 0n ? { commit: after, prepare: after } : START;
    const page: AllStreamResolvedEvent[] = [];
    for await (const resolved of this.client.readAll({
      direction: FORWARDS,
      fromPosition,
      maxCount: ALL_PAGE_SIZE,
    })) {
      page.push(resolved);
    }
    return page;
  }

  private async positionOf(streamId: string, revision: number): Promise<bigint> {
    const [event] = await this.readStream(streamId, { fromRevision: revision, maxCount: 1 });
    if (!event || event.globalPosition < 0n) {
      throw new Error(
        `stream ${streamId}: no $all position for revision ${revision} (EventStoreDB 22.6+ needed)`,
      );
    }
    return event.globalPosition;
  }

  /** The original result when these events already sit, in order, where this append would have put them. */
  private async retriedAppendResult(
    streamId: string,
    events: readonly NewEvent[],
    expected: ExpectedRevision,
  ): Promise<AppendResult | undefined> {
    const first = typeof expected === 'number' ? expected + 1 : expected === 'no_stream' ? 0 : undefined;
    if (first === undefined) return undefined;
    const stored = await this.readStream(streamId, { fromRevision: first, maxCount: events.length });
    const same = stored.length === events.length && stored.every((e, i) => e.id === events[i]?.id);
    const last = stored[stored.length - 1];
    return same && last
      ? { nextExpectedRevision: last.revision, lastGlobalPosition: last.globalPosition, retried: true }
      : undefined;
  }
}

class EsdbCheckpointStore implements CheckpointStore {
  private readonly trimmed = new Set<string>();

  constructor(private readonly client: EventStoreDBClient) {}

  async load(subscriptionId: string): Promise<bigint> {
    try {
      for await (const resolved of this.client.readStream(checkpointStream(subscriptionId), {
        direction: BACKWARDS,
        fromRevision: END,
        maxCount: 1,
      })) {
        const data = resolved.event?.data;
        if (isCheckpointData(data)) return BigInt(data.position);
      }
    } catch (error) {
      if (!(error instanceof StreamNotFoundError)) throw error;
    }
    return 0n;
  }

  async save(subscriptionId: string, position: bigint): Promise<void> {
    const stream = checkpointStream(subscriptionId);
    if (!this.trimmed.has(stream)) {
      await this.client.setStreamMetadata(stream, { maxCount: 10 });
      this.trimmed.add(stream);
    }
    await this.client.appendToStream(
      stream,
      jsonEvent({ type: 'CheckpointStored', data: { position: position.toString() } }),
    );
  }
}

function checkpointStream(subscriptionId: string): string {
  return `${ESDB_CHECKPOINT_CATEGORY}-${subscriptionId}`;
}

function isCheckpointData(data: unknown): data is { position: string } {
  return (
    typeof data === 'object' &&
    data !== null &&
    typeof (data as { position?: unknown }).position === 'string' &&
    /^[0-9]+$/.test((data as { position: string }).position)
  );
}

/** System streams ($...) and the store's own bookkeeping categories (_...). */
function isBookkeeping(streamId: string): boolean {
  return streamId.startsWith('$') || streamId.startsWith('_');
}

function toEsdbExpectedRevision(expected: ExpectedRevision): AppendExpectedRevision {
  switch (expected) {
    case 'any':
      return ANY;
    case 'no_stream':
      return NO_STREAM;
    case 'stream_exists':
      return STREAM_EXISTS;
    default:
      return BigInt(expected);
  }
}

function toEventData(event: NewEvent): ReturnType<typeof jsonEvent> {
  return jsonEvent({
    id: esdbEventId(event.id),
    type: event.type,
    // The client JSON.stringifies whatever it is given; JSONType only narrows what its typings accept.
    data: (event.data ?? null) as JSONType,
    metadata: { ...(event.metadata ?? {}), [EVENT_ID_KEY]: event.id },
  });
}

function fromResolved(resolved: ResolvedEvent | AllStreamResolvedEvent): RecordedEvent | undefined {
  const recorded = resolved.event;
  if (!recorded || !recorded.isJson) return undefined;
  const { [EVENT_ID_KEY]: ourId, ...metadata } = asMetadata(recorded.metadata);
  return {
    id: typeof ourId === 'string' ? ourId : recorded.id,
    streamId: recorded.streamId,
    type: recorded.type,
    data: recorded.data,
    metadata: metadata as EventMetadata,
    revision: Number(recorded.revision),
    globalPosition: recorded.position?.commit ?? -1n,
    recordedAt: recorded.created,
  };
}

function asMetadata(metadata: unknown): Record<string, unknown> {
  return typeof metadata === 'object' && metadata !== null && !(metadata instanceof Uint8Array)
    ? (metadata as Record<string, unknown>)
    : {};
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Namespace of our name-based event UUIDs (a fixed random UUID; changing it would break retries). */
const EVENT_ID_NAMESPACE = Buffer.from('5b0f5e0c8d1e4f7a9a3c2e6d1b7f4a90', 'hex');

/** Our id as an EventStoreDB event id: itself if already a UUID, else its RFC 4122 v5 UUID. */
export function esdbEventId(id: string): string {
  if (UUID_PATTERN.test(id)) return id.toLowerCase();
  const hash = createHash('sha1').update(EVENT_ID_NAMESPACE).update(id, 'utf8').digest();
  hash[6] = ((hash[6] ?? 0) & 0x0f) | 0x50;
  hash[8] = ((hash[8] ?? 0) & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
