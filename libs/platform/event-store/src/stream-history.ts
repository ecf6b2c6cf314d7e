import type { EventStore } from './event-store.port';

/**
 * A stream from its first event up to and including one event: what a projection folds to get the aggregate as
 * of that event (events are facts, the object is a projection). Stored events never change, so the answer is the
 * same on every redelivery. A first event is its own history and costs no read.
 */
export async function streamHistoryThrough<E extends { readonly type: string; readonly data: unknown }>(
  store: Pick<EventStore, 'readStream'>,
  event: E & { readonly id: string; readonly streamId: string; readonly revision: number },
): Promise<ReadonlyArray<{ readonly type: string; readonly data: unknown }>> {
  if (event.revision === 0) return [event];
  const history = await store.readStream(event.streamId, { maxCount: event.revision + 1 });
  if (history.length !== event.revision + 1 || history.at(-1)?.id !== event.id)
    throw new Error(`stream ${event.streamId} has no event ${event.id} at revision ${event.revision}`);
  return history;
}
