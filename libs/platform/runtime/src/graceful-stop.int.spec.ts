import { Controller, Get, Inject, Injectable, Module, type OnModuleDestroy } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { platformConfigFromEnv } from './platform.config';
import { type RunningService, startService } from './service';

let arrived = 0;
const order: string[] = [];

@Controller('slow')
class SlowController {
  constructor(@Inject(DataSource) private readonly dataSource: DataSource) {}

  /** Holds the request a while, then needs the database: what an in-flight write does. */
  @Get()
  async slow() {
    arrived++;
    await new Promise((r) => setTimeout(r, 700));
    const [row] = (await this.dataSource.query('SELECT 1 AS one')) as Array<{ one: number }>;
    order.push('request done');
    return { one: row?.one };
  }
}

/** Stands for a bus consumer: it must stop only once the HTTP requests have drained. */
@Injectable()
class Consumer implements OnModuleDestroy {
  onModuleDestroy(): void {
    order.push('consumer stopped');
  }
}

@Module({ controllers: [SlowController], providers: [Consumer] })
class SlowModule {}

describe('stopping a service (SIGTERM): stop accepting, drain in-flight requests, then close the database', () => {
  let db: TestDatabase;
  let running: RunningService;

  beforeAll(async () => {
    db = await createTestDatabase();
    running = await startService(
      {
        ...platformConfigFromEnv({ DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'fatal' }),
      },
      [{ name: 'slow', imports: [SlowModule] }],
      { service: 'graceful-test' },
    );
  });
  afterAll(async () => {
    await db.drop();
  });

  it('completes the requests in flight, refuses new connections, and answers no 500', async () => {
    const inFlight = Array.from({ length: 6 }, () =>
      fetch(`${running.url}/slow`).then(
        async (r) => ({ status: r.status, body: (await r.json()) as unknown }),
        (e: unknown) => ({ status: 0, body: String(e) }),
      ),
    );
    while (arrived < 6) await new Promise((r) => setTimeout(r, 10));
    const stopped = running.stop();
    // The listener closes first: a new connection is refused while the in-flight requests still run.
    const server = running.app.getHttpServer();
    while (server.listening) await new Promise((r) => setTimeout(r, 5));
    const late = await fetch(`${running.url}/slow`).then(
      (r) => `status ${r.status}`,
      (e: unknown) => String((e as { cause?: { code?: string } }).cause?.code ?? e),
    );
    expect(late).toBe('ECONNREFUSED');
    expect(await Promise.all(inFlight)).toEqual(
      Array.from({ length: 6 }, () => ({ status: 200, body: { one: 1 } })),
    );
    await stopped;
    expect(order).toEqual([...Array.from({ length: 6 }, () => 'request done'), 'consumer stopped']);
  });
});
