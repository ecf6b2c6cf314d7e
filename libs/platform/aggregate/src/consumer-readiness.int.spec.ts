import { Inject, Injectable, Module, type OnApplicationBootstrap } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DatabaseModule } from '@stablepay/database';
import {
  type BusMessage,
  AddParkedStreamSource1795449600000,
  CreateParkedStreams1767312000000,
  EVENT_BUS,
  type EventBus,
  StoreLogEventBus,
} from '@stablepay/event-bus';
import { createPostgresEventStore, type EventStore } from '@stablepay/event-store';
import { createHttpApp, HealthModule } from '@stablepay/http';
import { createTestDatabase, eventually, type TestDatabase } from '@stablepay/testing';
import { EVENT_STORE, EventSourcingModule } from './event-sourcing.module';

const GROUP = 'test.ready-consumer';
/** Polling with a generous bound (the machine is shared): never a timed assertion. */
const POLL = { timeoutMs: 30_000, intervalMs: 50 };

/** What the test consumer does with the next message: handle it, fail, or hang until released. */
const behaviour: { mode: 'ok' | 'fail' | 'hang'; release: () => void } = {
  mode: 'ok',
  release: () => undefined,
};

@Injectable()
class TestConsumer implements OnApplicationBootstrap {
  constructor(@Inject(EVENT_BUS) private readonly bus: EventBus) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.bus.consume({ group: GROUP, topics: ['payments.payment.v1'], handler: (m) => this.handle(m) });
  }

  private async handle(_message: BusMessage): Promise<void> {
    if (behaviour.mode === 'fail') throw new Error('the database refuses this draft');
    if (behaviour.mode === 'hang') await new Promise<void>((resolve) => (behaviour.release = resolve));
  }
}

describe('/ready and /metrics show a stalled bus consumer', () => {
  let database: TestDatabase;
  let app: NestFastifyApplication;
  let url: string;

  const ready = async (): Promise<{ status: number; consumers: string }> => {
    const res = await fetch(`${url}/ready`);
    const body = (await res.json()) as { checks: Record<string, string> };
    return { status: res.status, consumers: body.checks['consumers'] ?? '' };
  };
  const gauge = async (name: string): Promise<number> => {
    const text = await (await fetch(`${url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{group="${GROUP}"} `));
    return line ? Number(line.split(' ')[1]) : NaN;
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    @Module({
      imports: [
        HealthModule,
        DatabaseModule.forRoot({
          url: database.url,
          migrations: [CreateParkedStreams1767312000000, AddParkedStreamSource1795449600000],
        }),
        EventSourcingModule.forRoot({
          createStore: () =>
            createPostgresEventStore({
              url: database.url,
              poolSize: 3,
              subscriptions: { retry: { initialMs: 10, maxMs: 50 } },
            }),
          createBus: async (store) => new StoreLogEventBus(store),
          // Small thresholds so the test is short; never parked, so the failing case stays failing.
          supervision: {
            stalledAfterFailures: 3,
            stalledAfterMs: 300,
            probeIntervalMs: 100,
            isolateAfterFailures: 1_000_000,
          },
        }),
      ],
      providers: [TestConsumer],
    })
    class TestModule {}
    app = await createHttpApp(TestModule, { service: 'test', logLevel: 'fatal' });
    await app.listen(0, '127.0.0.1');
    const address = app.getHttpServer().address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });

  afterAll(async () => {
    behaviour.release();
    await app?.close();
    await database?.drop();
  });

  const append = (id: string): Promise<unknown> =>
    app
      .get<EventStore>(EVENT_STORE)
      .appendToStream('payment-ready', [{ id, type: 'PaymentNoted', data: {} }]);

  it('answers 503 naming the group after failures in a row, with the stalled gauge at 1, and 200 again after recovery', async () => {
    expect((await ready()).status).toBe(200);
    behaviour.mode = 'fail';
    await append('ready-0');
    const failing = await eventually(
      ready,
      (r) =>
        r.status === 503 &&
        r.consumers.includes(`${GROUP} stalled: `) &&
        /failures in a row/.test(r.consumers),
      '/ready 503 for the failing consumer',
      POLL,
    );
    expect(failing.consumers).toMatch(/refuses this draft/);
    expect(await gauge('stablepay_consumer_stalled')).toBe(1);
    expect(await gauge('stablepay_consumer_consecutive_failures')).toBeGreaterThanOrEqual(3);

    behaviour.mode = 'ok';
    const recovered = await eventually(ready, (r) => r.status === 200, '/ready 200 after recovery', POLL);
    expect(recovered.consumers).toBe('ok');
    expect(await gauge('stablepay_consumer_stalled')).toBe(0);
  });

  it('answers 503 for a handler that hangs (no failure at all), its lag grows, and 200 once it returns', async () => {
    behaviour.mode = 'hang';
    await append('ready-1');
    const hung = await eventually(
      ready,
      (r) => /no progress for .* a handler call running/.test(r.consumers),
      'the hang seen',
      POLL,
    );
    expect(hung.status).toBe(503);
    expect(await gauge('stablepay_consumer_stalled')).toBe(1);
    const lag = await gauge('stablepay_consumer_lag_seconds');
    await eventually(
      () => gauge('stablepay_consumer_lag_seconds'),
      (l) => l > lag + 0.2,
      'lag growing',
      POLL,
    );

    behaviour.mode = 'ok';
    behaviour.release();
    await eventually(ready, (r) => r.status === 200, '/ready 200 after the handler returned', POLL);
    expect(await gauge('stablepay_consumer_stalled')).toBe(0);
  });
});
