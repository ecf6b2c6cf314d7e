import { randomUUID } from 'node:crypto';
import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { conflict } from '@stablepay/util';
import { type Decider, type DomainEvent, handleCommand, loadAggregate } from './decider';

/** A seat that can be taken once: enough to show load-decide-append, conflicts and idempotent retries. */
type SeatEvent = DomainEvent<'SeatTaken.v1', { by: string }> | DomainEvent<'NoteAdded.v1', { text: string }>;
type SeatCommand = { type: 'Take'; by: string } | { type: 'Note'; text: string };
interface Seat {
  takenBy: string | null;
  notes: number;
}
const seat: Decider<Seat, SeatCommand, SeatEvent> = {
  initialState: () => ({ takenBy: null, notes: 0 }),
  evolve: (state, event) =>
    event.type === 'SeatTaken.v1'
      ? { ...state, takenBy: event.data.by }
      : { ...state, notes: state.notes + 1 },
  decide: (command, state) => {
    if (command.type === 'Note') return [{ type: 'NoteAdded.v1', data: { text: command.text } }];
    if (state.takenBy !== null) throw conflict('seat_taken', `taken by ${state.takenBy}`);
    return [{ type: 'SeatTaken.v1', data: { by: command.by } }];
  },
};

describe('handleCommand on the Postgres event store', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  beforeAll(async () => {
    db = await createTestDatabase();
    store = await createPostgresEventStore({ url: db.url });
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('loads, decides, appends and returns the folded state and revision', async () => {
    const result = await handleCommand(
      store,
      'seat-a',
      seat,
      { type: 'Take', by: 'ann' },
      { metadata: { merchantId: 'mer_1' } },
    );
    expect(result).toMatchObject({ state: { takenBy: 'ann' }, revision: 0 });
    const [event] = await store.readStream('seat-a');
    expect(event).toMatchObject({
      type: 'SeatTaken.v1',
      data: { by: 'ann' },
      metadata: { merchantId: 'mer_1' },
    });
  });

  it('a domain error from decide appends nothing', async () => {
    await expect(handleCommand(store, 'seat-a', seat, { type: 'Take', by: 'bob' })).rejects.toMatchObject({
      code: 'seat_taken',
    });
    expect(await store.readStream('seat-a')).toHaveLength(1);
  });

  it('concurrent commands re-decide on conflict: exactly one takes the seat', async () => {
    const outcomes = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        handleCommand(store, 'seat-b', seat, { type: 'Take', by: `p${i}` }),
      ),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const o of outcomes.filter((x): x is PromiseRejectedResult => x.status === 'rejected')) {
      expect(o.reason).toMatchObject({ code: 'seat_taken' });
    }
    expect(await store.readStream('seat-b')).toHaveLength(1);
  });

  it('a command that loses the race on its stream every time is a 409 concurrent_update, appending nothing', async () => {
    await handleCommand(store, 'seat-contended', seat, { type: 'Note', text: 'first' });
    // Another writer appends between every load and append of the command.
    const contended = Object.create(store) as PostgresEventStore;
    contended.appendToStream = async (streamId, events, options) => {
      await store.appendToStream(streamId, [
        { id: randomUUID(), type: 'NoteAdded.v1', data: { text: 'other' }, metadata: {} },
      ]);
      return store.appendToStream(streamId, events, options);
    };
    await expect(
      handleCommand(contended, 'seat-contended', seat, { type: 'Note', text: 'mine' }, { maxRetries: 2 }),
    ).rejects.toMatchObject({ status: 409, code: 'concurrent_update', retryable: true });
    const texts = (await store.readStream('seat-contended')).map((e) => (e.data as { text: string }).text);
    expect(texts).toEqual(['first', 'other', 'other', 'other']);
  });

  it('the same idempotency key applied twice appends once and reports the current state', async () => {
    const first = await handleCommand(
      store,
      'seat-c',
      seat,
      { type: 'Note', text: 'hello' },
      { idempotencyKey: 'note-1' },
    );
    const again = await handleCommand(
      store,
      'seat-c',
      seat,
      { type: 'Note', text: 'hello' },
      { idempotencyKey: 'note-1' },
    );
    expect(first.newEvents).toHaveLength(1);
    expect(again).toMatchObject({ newEvents: [], revision: 0, state: { notes: 1 } });
    const other = await handleCommand(
      store,
      'seat-c',
      seat,
      { type: 'Note', text: 'hello' },
      { idempotencyKey: 'note-2' },
    );
    expect(other.revision).toBe(1);
    expect((await loadAggregate(store, 'seat-c', seat)).state.notes).toBe(2);
  });

  it('a command already applied under its key is answered, not decided again (a retried create is not refused)', async () => {
    const take = { type: 'Take', by: 'p1' } as const;
    const first = await handleCommand(store, 'seat-d', seat, take, { idempotencyKey: 'take-1' });
    // Deciding Take again would throw seat_taken; the retry of the same command answers the state instead.
    const retry = await handleCommand(store, 'seat-d', seat, take, { idempotencyKey: 'take-1' });
    expect(retry).toMatchObject({ newEvents: [], revision: first.revision });
    await expect(
      handleCommand(store, 'seat-d', seat, { type: 'Take', by: 'p2' }, { idempotencyKey: 'take-2' }),
    ).rejects.toMatchObject({ code: 'seat_taken' });
    expect(await store.readStream('seat-d')).toHaveLength(1);
  });

  describe('expectNew (a command that creates its stream)', () => {
    const counting = () => {
      let reads = 0;
      const counted = {
        ...store,
        appendToStream: store.appendToStream.bind(store),
        readStream: (...args: Parameters<typeof store.readStream>) => {
          reads++;
          return store.readStream(...args);
        },
      } as typeof store;
      return { counted, reads: () => reads };
    };

    it('appends a new stream without reading it first', async () => {
      const { counted, reads } = counting();
      const result = await handleCommand(
        counted,
        'seat-e',
        seat,
        { type: 'Take', by: 'ann' },
        { expectNew: true, idempotencyKey: 'take-e' },
      );
      expect(result).toMatchObject({ state: { takenBy: 'ann' }, revision: 0 });
      expect(result.newEvents).toHaveLength(1);
      expect(reads()).toBe(0);
    });

    it('a retried creation is answered from the stream with no new event', async () => {
      const take = { type: 'Take', by: 'ann' } as const;
      await handleCommand(store, 'seat-f', seat, take, { expectNew: true, idempotencyKey: 'take-f' });
      const retry = await handleCommand(store, 'seat-f', seat, take, {
        expectNew: true,
        idempotencyKey: 'take-f',
      });
      expect(retry).toMatchObject({ newEvents: [], revision: 0, state: { takenBy: 'ann' } });
      expect(await store.readStream('seat-f')).toHaveLength(1);
    });

    it('an existing stream is decided as it is (the creation is refused there)', async () => {
      await handleCommand(store, 'seat-g', seat, { type: 'Take', by: 'ann' });
      await expect(
        handleCommand(store, 'seat-g', seat, { type: 'Take', by: 'bob' }, { expectNew: true }),
      ).rejects.toMatchObject({ code: 'seat_taken' });
      // A command that is valid on the existing stream still applies at the next revision.
      const note = await handleCommand(
        store,
        'seat-g',
        seat,
        { type: 'Note', text: 'x' },
        { expectNew: true },
      );
      expect(note).toMatchObject({ revision: 1, state: { takenBy: 'ann', notes: 1 } });
    });
  });
});
