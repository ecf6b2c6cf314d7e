import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import type { EventStore, RecordedEvent } from './event-store.port';
import { InMemoryEventLog, InMemoryEventStore } from './in-memory/in-memory-event-store';
import { createPostgresEventStore } from './postgres/postgres-event-store';
import { UpcasterRegistry, withUpcasters } from './upcasting';

/**
 * An event appended in an old shape (as code of an earlier release stored it) is read in the newest shape through
 * every read path of the decorated store; the stored row itself is untouched.
 */
const registry = new UpcasterRegistry([
  {
    from: 'Greeted.v1',
    to: 'Greeted.v2',
    upcast: (d) => ({ name: (d as { who: string }).who, polite: false }),
  },
  { from: 'Greeted.v2', to: 'Greeted.v3', upcast: (d) => ({ ...(d as object), at: null }) },
]);
const NEWEST = { type: 'Greeted.v3', data: { name: 'ada', polite: false, at: null } };

interface Backing {
  open(): Promise<EventStore>;
  dispose(): Promise<void>;
}

const backings: Array<[string, () => Promise<Backing>]> = [
  [
    'in-memory',
    async () => {
      const log = new InMemoryEventLog();
      return { open: async () => new InMemoryEventStore(log), dispose: async () => undefined };
    },
  ],
  [
    'postgres',
    async () => {
      const database: TestDatabase = await createTestDatabase();
      return {
        open: () => createPostgresEventStore({ url: database.url, poolSize: 2 }),
        dispose: () => database.drop(),
      };
    },
  ],
];

describe.each(backings)('withUpcasters over the %s store', (_name, setup) => {
  let backing: Backing;
  let raw: EventStore;
  let store: EventStore;

  beforeAll(async () => {
    backing = await setup();
    raw = await backing.open();
    store = withUpcasters(raw, registry);
    // Stored as the old release did: straight through the undecorated adapter.
    await raw.appendToStream('greeting-1', [{ id: 'g1', type: 'Greeted.v1', data: { who: 'ada' } }]);
    // Appends through the decorator pass through unchanged.
    await store.appendToStream('greeting-1', [
      { id: 'g2', type: 'Greeted.v3', data: { name: 'bob', polite: true, at: 'now' } },
    ]);
  });

  afterAll(async () => {
    await raw?.close();
    await backing?.dispose();
  });

  const shape = (events: readonly RecordedEvent[]) =>
    events.map(({ id, type, data }) => ({ id, type, data }));
  const expected = [
    { id: 'g1', ...NEWEST },
    { id: 'g2', type: 'Greeted.v3', data: { name: 'bob', polite: true, at: 'now' } },
  ];

  it('readStream reads the old shape as the newest, forwards and backwards', async () => {
    expect(shape(await store.readStream('greeting-1'))).toEqual(expected);
    expect(shape(await store.readStream('greeting-1', { direction: 'backwards' }))).toEqual(
      [...expected].reverse(),
    );
  });

  it('readAll reads the old shape as the newest', async () => {
    expect(shape(await store.readAll({ categories: ['greeting'] }))).toEqual(expected);
  });

  it('a subscription delivers the newest shape, one by one and in batches', async () => {
    const seen: RecordedEvent[] = [];
    const one = await store.subscribeToAll({
      subscriptionId: 'upcast-one',
      categories: ['greeting'],
      handler: async (event) => {
        seen.push(event);
      },
    });
    await one.caughtUp();
    await one.stop();
    expect(shape(seen)).toEqual(expected);

    const batched: RecordedEvent[] = [];
    const batches = await store.subscribeToAll({
      subscriptionId: 'upcast-batch',
      categories: ['greeting'],
      handler: async (event) => {
        batched.push(event);
      },
      handleBatch: async (events) => {
        batched.push(...events);
      },
    });
    await batches.caughtUp();
    await batches.stop();
    expect(shape(batched)).toEqual(expected);
  });

  it('leaves what is stored untouched', async () => {
    expect(shape(await raw.readStream('greeting-1'))[0]).toEqual({
      id: 'g1',
      type: 'Greeted.v1',
      data: { who: 'ada' },
    });
  });
});
