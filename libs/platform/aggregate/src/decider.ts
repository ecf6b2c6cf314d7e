import { createHash } from 'node:crypto';
import {
  DuplicateEventIdError,
  type EventMetadata,
  type EventStore,
  type NewEvent,
  type RecordedEvent,
  WrongExpectedRevisionError,
} from '@stablepay/event-store';
import { conflict } from '@stablepay/util';

/** An event as the domain sees it: a literal type and its data. Metadata is added at the edge. */
export interface DomainEvent<Type extends string = string, Data = unknown> {
  readonly type: Type;
  readonly data: Data;
}

/** An aggregate as plain functions (emmett's decider): fold events into state, decide events from a command. */
export interface Decider<State, Command, Event extends DomainEvent> {
  readonly initialState: () => State;
  readonly evolve: (state: State, event: Event) => State;
  readonly decide: (command: Command, state: State) => Event[];
}

export interface CommandOptions {
  /** Makes event ids deterministic: the same command retried with the same key appends nothing twice. */
  readonly idempotencyKey?: string;
  readonly metadata?: EventMetadata;
  /** Optimistic-concurrency retries when another writer appended first (default 5). */
  readonly maxRetries?: number;
  /**
   * The command normally creates its stream (a fresh id): the first attempt decides against the initial state and
   * appends with `no_stream` without reading the stream, saving a round trip. If the stream exists after all (a
   * retried command, an id collision) it falls back to load, fold and decide as usual, so the result is the same
   * as without the option; an append the store reports as an idempotent retry is answered from the stream.
   */
  readonly expectNew?: boolean;
}

export interface CommandResult<State, Event> {
  readonly state: State;
  readonly newEvents: Event[];
  /** Stream revision after the append (or of the last event read when nothing was appended); -1 for none. */
  readonly revision: number;
}

/** Deterministic UUID-shaped id from a key, so a retried command produces the same event ids. */
export function deterministicEventId(streamId: string, idempotencyKey: string, index: number): string {
  const h = createHash('sha256').update(`${streamId}\u0000${idempotencyKey}\u0000${index}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h.slice(16, 17), 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export async function loadAggregate<State, Event extends DomainEvent>(
  store: EventStore,
  streamId: string,
  decider: Pick<Decider<State, never, Event>, 'initialState' | 'evolve'>,
): Promise<{ state: State; revision: number; events: RecordedEvent[] }> {
  const events = await store.readStream(streamId);
  let state = decider.initialState();
  for (const e of events) state = decider.evolve(state, { type: e.type, data: e.data } as Event);
  const last = events[events.length - 1];
  return { state, revision: last ? last.revision : -1, events };
}

/**
 * Load, fold, decide, append with the expected revision; on a concurrent append, reload and decide again.
 * Domain errors thrown by decide propagate unchanged.
 */
export async function handleCommand<State, Command, Event extends DomainEvent>(
  store: EventStore,
  streamId: string,
  decider: Decider<State, Command, Event>,
  command: Command,
  options: CommandOptions = {},
): Promise<CommandResult<State, Event>> {
  const maxRetries = options.maxRetries ?? 5;
  if (options.expectNew) {
    const created = await tryCreate(store, streamId, decider, command, options);
    if (created) return created;
  }
  for (let attempt = 0; ; attempt++) {
    const { state, revision, events } = await loadAggregate(store, streamId, decider);
    // Already applied (a retry after a lost answer): its first event is in the stream under the id the key
    // derives. Answered without deciding again, which could now refuse (a create finds its own aggregate).
    if (options.idempotencyKey) {
      const firstId = deterministicEventId(streamId, options.idempotencyKey, 0);
      if (events.some((e) => e.id === firstId)) return { state, newEvents: [], revision };
    }
    const newEvents = decider.decide(command, state);
    if (newEvents.length === 0) return { state, newEvents, revision };
    const toAppend = toNewEvents(streamId, newEvents, options);
    try {
      const result = await store.appendToStream(streamId, toAppend, {
        expectedRevision: revision < 0 ? 'no_stream' : revision,
      });
      const next = newEvents.reduce(decider.evolve, state);
      return { state: next, newEvents, revision: result.nextExpectedRevision };
    } catch (error) {
      if (error instanceof WrongExpectedRevisionError) {
        if (attempt < maxRetries) continue;
        // Lost the race every time to other writers of this stream: nothing was appended, and the same request
        // may succeed a moment later. A 409 says so over HTTP (and is not stored against an Idempotency-Key; the
        // bare error was a 500), and `retryable` has a bus consumer retry it rather than park the stream.
        throw Object.assign(
          conflict(
            'concurrent_update',
            'This object was changed by other requests at the same time; retry the request.',
          ),
          { retryable: true },
        );
      }
      // The same idempotency key already produced its events (a retry after a lost response, a timer firing
      // twice): the command has been applied, so report the current state and append nothing.
      if (error instanceof DuplicateEventIdError && options.idempotencyKey) {
        const current = await loadAggregate(store, streamId, decider);
        return { state: current.state, newEvents: [], revision: current.revision };
      }
      throw error;
    }
  }
}

function toNewEvents(streamId: string, events: readonly DomainEvent[], options: CommandOptions): NewEvent[] {
  return events.map((e, i) => ({
    id: options.idempotencyKey
      ? deterministicEventId(streamId, options.idempotencyKey, i)
      : crypto.randomUUID(),
    type: e.type,
    data: e.data,
    metadata: options.metadata ?? {},
  }));
}

/**
 * handleCommand's first attempt for a command that creates its stream: decide against the initial state and
 * append with `no_stream`, no read. Undefined when the stream already exists (the caller then runs the usual
 * load-decide-append, which decides against the stream as it is).
 */
async function tryCreate<State, Command, Event extends DomainEvent>(
  store: EventStore,
  streamId: string,
  decider: Decider<State, Command, Event>,
  command: Command,
  options: CommandOptions,
): Promise<CommandResult<State, Event> | undefined> {
  const initial = decider.initialState();
  let newEvents: Event[];
  try {
    newEvents = decider.decide(command, initial);
  } catch {
    // Refused against a new stream: the usual path decides against the stream as it is (a retried command whose
    // stream exists is answered from it) and raises the refusal itself when the stream is new.
    return undefined;
  }
  if (newEvents.length === 0) return undefined;
  try {
    const result = await store.appendToStream(streamId, toNewEvents(streamId, newEvents, options), {
      expectedRevision: 'no_stream',
    });
    if (result.retried) {
      // The same command appended these events before (its answer was lost): report the stream as it is.
      const current = await loadAggregate(store, streamId, decider);
      return { state: current.state, newEvents: [], revision: current.revision };
    }
    return {
      state: newEvents.reduce(decider.evolve, initial),
      newEvents,
      revision: result.nextExpectedRevision,
    };
  } catch (error) {
    if (error instanceof WrongExpectedRevisionError) return undefined;
    if (error instanceof DuplicateEventIdError && options.idempotencyKey) return undefined;
    throw error;
  }
}
