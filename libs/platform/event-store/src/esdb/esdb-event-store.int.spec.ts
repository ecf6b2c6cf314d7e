import { describeEventStoreConformance } from '../event-store.conformance';
import { createEsdbEventStore, esdbEventId } from './esdb-event-store';

// EventStoreDB runs only where one is provided (ESDB_URL, e.g. esdb://localhost:2113?tls=false); this machine
// has none, so by default the conformance run is skipped with the reason printed.
const esdbUrl = process.env['ESDB_URL'];

if (esdbUrl) {
  describeEventStoreConformance('EsdbEventStore', async () => ({
    open: () =>
      createEsdbEventStore({
        connectionString: esdbUrl,
        subscriptions: { retry: { initialMs: 20, maxMs: 200 } },
      }),
    dispose: async () => undefined,
  }));
} else {
  console.log(
    'EsdbEventStore conformance skipped: ESDB_URL is not set (e.g. ESDB_URL=esdb://localhost:2113?tls=false)',
  );
  describe.skip('EventStore conformance: EsdbEventStore (skipped: ESDB_URL is not set)', () => {
    it('needs a running EventStoreDB/KurrentDB named by ESDB_URL', () => undefined);
  });
}

describe('esdbEventId', () => {
  it('maps any event id to the same RFC 4122 version-5 UUID every time', () => {
    const uuid = esdbEventId('evt_01jzp3k4m5n6p7q8r9s0t1v2w3');
    expect(uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(esdbEventId('evt_01jzp3k4m5n6p7q8r9s0t1v2w3')).toBe(uuid);
    expect(esdbEventId('evt_01jzp3k4m5n6p7q8r9s0t1v2w4')).not.toBe(uuid);
  });

  it('keeps an id that is already a UUID', () => {
    expect(esdbEventId('0B6C2A52-8E0F-4C55-9E2B-5F0D2A8E4B11')).toBe('0b6c2a52-8e0f-4c55-9e2b-5f0d2a8e4b11');
  });
});
