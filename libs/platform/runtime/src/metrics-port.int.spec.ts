import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { platformConfigFromEnv } from './platform.config';
import { type RunningService, startService } from './service';

const start = (db: TestDatabase, env: Record<string, string> = {}): Promise<RunningService> =>
  startService(
    platformConfigFromEnv({ DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'fatal', ...env }),
    [{ name: 'metrics-test', imports: [] }],
    { service: 'metrics-test' },
  );

describe('where /metrics is served (METRICS_PORT)', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('is on the API port when METRICS_PORT is unset (the embedded run)', async () => {
    const running = await start(db);
    try {
      expect(running.metricsUrl).toBeUndefined();
      const res = await fetch(`${running.url}/metrics`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('process_cpu_seconds_total');
    } finally {
      await running.stop();
    }
  });

  it('moves to its own listener with METRICS_PORT: the API port answers it 404 in the envelope', async () => {
    const running = await start(db, { METRICS_PORT: '0' });
    try {
      const api = await fetch(`${running.url}/metrics`);
      expect(api.status).toBe(404);
      expect(await api.json()).toEqual({
        error: expect.objectContaining({ type: 'invalid_request', code: 'route_not_found' }),
      });
      // The API's own probes stay where they were.
      expect((await fetch(`${running.url}/health`)).status).toBe(200);

      const metricsUrl = running.metricsUrl ?? '';
      expect(new URL(metricsUrl).port).not.toBe(new URL(running.url).port);
      const scraped = await fetch(metricsUrl);
      expect(scraped.status).toBe(200);
      expect(scraped.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await scraped.text()).toContain('process_cpu_seconds_total');
      // Nothing else of the API on that port.
      expect((await fetch(new URL('/health', metricsUrl))).status).toBe(404);
    } finally {
      await running.stop();
    }
    await expect(fetch(running.metricsUrl ?? '')).rejects.toThrow();
  });
});
