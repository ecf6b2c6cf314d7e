import type { EventStore, RecordedEvent, SubscribeToAllOptions } from './event-store.port';

/**
 * Upcasting: an event stored in an old shape is read as its newest version, so deciders, projections and
 * consumers only ever handle the latest shape. Stored events are never rewritten; the translation happens on
 * every read (readStream, readAll, subscription delivery), which keeps it reversible and the log the truth.
 *
 * Event types carry their version (`SubscriptionCheckoutCreated.v1`), so an upcaster is keyed by the stored type
 * and names the type it produces. Upcasters chain: v1 -> v2 -> v3 runs both steps. They are pure functions of the
 * old data, live in the domain lib of the aggregate (which declares them structurally; no import of this lib),
 * and each has a unit test on a frozen old payload.
 */
export interface Upcaster {
  /** The stored type it reads, version included. */
  readonly from: string;
  /** The type it produces: the next version (possibly renamed). */
  readonly to: string;
  /** Pure: the old event's data -> the new event's data. Must not mutate its input. */
  readonly upcast: (data: unknown) => unknown;
}

/** Upper bound on a chain's length: registration refuses cycles, this only guards a corrupted registry. */
const MAX_CHAIN = 32;

export class UpcasterRegistry {
  private readonly byType = new Map<string, Upcaster>();

  /** The same upcaster object may be registered twice (two services of one process share a scope's list). */
  constructor(upcasters: readonly Upcaster[] = []) {
    for (const upcaster of upcasters) {
      const existing = this.byType.get(upcaster.from);
      if (existing === upcaster) continue;
      if (existing) throw new Error(`two upcasters read event type '${upcaster.from}'`);
      if (upcaster.from === upcaster.to)
        throw new Error(`upcaster of '${upcaster.from}' must produce another type (a new version)`);
      this.byType.set(upcaster.from, upcaster);
    }
    for (const start of this.byType.keys()) {
      const seen = new Set<string>([start]);
      for (let type = this.byType.get(start)?.to; type !== undefined; type = this.byType.get(type)?.to) {
        if (seen.has(type)) throw new Error(`upcasters form a cycle through '${type}'`);
        seen.add(type);
      }
    }
  }

  get size(): number {
    return this.byType.size;
  }

  /** The newest shape of `event`: the event itself when no upcaster reads its type. */
  upcast<E extends { readonly type: string; readonly data: unknown }>(event: E): E {
    let upcaster = this.byType.get(event.type);
    if (!upcaster) return event;
    let type = event.type;
    let data = event.data;
    for (let step = 0; upcaster; step++) {
      if (step >= MAX_CHAIN) throw new Error(`upcaster chain from '${event.type}' is too long`);
      data = upcaster.upcast(data);
      type = upcaster.to;
      upcaster = this.byType.get(type);
    }
    return { ...event, type, data };
  }
}

/**
 * The store as its readers should see it: every read and every subscription delivery upcast to the newest
 * version; appends pass through unchanged (new code only writes the newest version). Applied where the store is
 * created (libs/platform/runtime), so the bus (store log or the Kafka relay) publishes the newest shape too.
 */
export function withUpcasters(store: EventStore, registry: UpcasterRegistry): EventStore {
  if (registry.size === 0) return store;
  const up = (event: RecordedEvent): RecordedEvent => registry.upcast(event);
  return {
    appendToStream: (streamId, events, options) => store.appendToStream(streamId, events, options),
    readStream: async (streamId, options) => (await store.readStream(streamId, options)).map(up),
    readAll: async (options) => (await store.readAll(options)).map(up),
    headPosition: () => store.headPosition(),
    subscribeToAll: (options: SubscribeToAllOptions) => {
      // An upcaster that throws is a bug in it: it surfaces through onError and the event is retried like a
      // failing handler, so nothing is skipped while the fix ships.
      const { handler, handleBatch, ...rest } = options;
      return store.subscribeToAll({
        ...rest,
        handler: (event) => handler(up(event)),
        ...(handleBatch ? { handleBatch: (events) => handleBatch(events.map(up)) } : {}),
      });
    },
    close: () => store.close(),
  };
}
