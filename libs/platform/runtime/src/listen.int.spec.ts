import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { platformConfigFromEnv } from './platform.config';
import { startService } from './service';

describe('a service that cannot listen names the variable to change', () => {
  let db: TestDatabase;
  const start = (env: Record<string, string>) =>
    startService(
      platformConfigFromEnv({
        DATABASE_URL: db.url,
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'fatal',
        ...env,
      }),
      [{ name: 'listen-test', imports: [] }],
      { service: 'listen-test' },
    );

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('HOST that is no address of this machine: a ConfigError naming HOST (it was the bare errno, exit 1)', async () => {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine, and no DNS involved.
    await expect(start({ HOST: '192.0.2.1' })).rejects.toThrow(
      /^environment variable HOST: cannot listen on 192\.0\.2\.1 \(EADDRNOTAVAIL\)/,
    );
  });

  it('a PORT another process holds: a ConfigError naming PORT', async () => {
    const running = await start({});
    try {
      const port = new URL(running.url).port;
      await expect(start({ PORT: port })).rejects.toThrow(
        `environment variable PORT: cannot listen on port ${port} of 127.0.0.1 (EADDRINUSE): set PORT to a free port`,
      );
    } finally {
      await running.stop();
    }
  });
});
