import {
  WrongExpectedRevisionError,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type ReadStreamOptions,
} from './event-store.port';

/** Argument checks shared by every adapter, so they all reject the same malformed calls the same way. */
export function assertAppendable(
  streamId: string,
  events: readonly NewEvent[],
  expected: ExpectedRevision,
): void {
  if (streamId.length === 0) throw new TypeError('streamId must not be empty');
  if (events.length === 0) throw new TypeError(`stream ${streamId}: an append needs at least one event`);
  if (typeof expected === 'number' && (!Number.isInteger(expected) || expected < 0)) {
    throw new TypeError(
      `stream ${streamId}: expected revision must be a revision >= 0, 'no_stream', 'stream_exists' or 'any'`,
    );
  }
  const ids = new Set<string>();
  for (const event of events) {
    if (event.id.length === 0) throw new TypeError(`stream ${streamId}: event id must not be empty`);
    if (event.type.length === 0) throw new TypeError(`stream ${streamId}: event type must not be empty`);
    if (ids.has(event.id))
      throw new TypeError(`stream ${streamId}: event id ${event.id} appears twice in one append`);
    ids.add(event.id);
  }
}

export function assertReadOptions(options: ReadStreamOptions | ReadAllOptions): void {
  const { maxCount } = options;
  if (maxCount !== undefined && (!Number.isInteger(maxCount) || maxCount < 0)) {
    throw new TypeError('maxCount must be a non-negative integer');
  }
  if ('fromRevision' in options && options.fromRevision !== undefined) {
    if (!Number.isInteger(options.fromRevision) || options.fromRevision < 0) {
      throw new TypeError('fromRevision must be a non-negative integer');
    }
  }
}

/** Throws the typed conflict unless `current` (-1: no stream) satisfies `expected`. */
export function checkExpectedRevision(streamId: string, expected: ExpectedRevision, current: number): void {
  const ok =
    expected === 'any' ||
    (expected === 'no_stream' && current < 0) ||
    (expected === 'stream_exists' && current >= 0) ||
    expected === current;
  if (!ok) throw new WrongExpectedRevisionError(streamId, expected, current < 0 ? 'no_stream' : current);
}
