import { Controller, Get, Module, UseGuards } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createHttpApp, DEFAULT_RATE_LIMITS, Public } from '@stablepay/http';
import { AdminTokenGuard } from './admin.controller';
import { MERCHANTS_ADMIN_TOKEN } from './merchants.port';

const ADMIN_TOKEN = 'adm_' + 'k'.repeat(40);

/** The operator API's guard, as the admin routes use it. */
@Public()
@UseGuards(AdminTokenGuard)
@Controller('admin')
class GuardedController {
  @Get('ping')
  ping() {
    return { object: 'pong' };
  }
}

describe('operator token behind the failed-authentication lockout (real Fastify server)', () => {
  let app: NestFastifyApplication;
  let base = '';

  beforeAll(async () => {
    @Module({
      controllers: [GuardedController],
      providers: [{ provide: MERCHANTS_ADMIN_TOKEN, useValue: ADMIN_TOKEN }],
    })
    class AdminTestModule {}
    app = await createHttpApp(AdminTestModule, {
      service: 'test',
      logLevel: 'fatal',
      trustProxy: ['127.0.0.1'],
      rateLimits: {
        ...DEFAULT_RATE_LIMITS,
        perKeyPerSecond: 0,
        perSourcePerSecond: 0,
        authFailuresPerMinute: 3,
      },
    });
    await app.listen(0, '127.0.0.1');
    const address = app.getHttpServer().address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(async () => {
    await app?.close();
  });

  const as = (client: string, token: string) =>
    fetch(`${base}/admin/ping`, { headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': client } });

  it('answers a locked-out source 429 for the right token too, so its guesses learn nothing; the operator elsewhere is served', async () => {
    const guesser = '198.51.100.9';
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await as(guesser, `adm_guess_${i}`)).status);
    expect(statuses).toEqual([401, 401, 401, 429]);

    // The right token from the locked-out source: refused like every guess, not 200.
    const guessed = await as(guesser, ADMIN_TOKEN);
    expect(guessed.status).toBe(429);
    expect(await guessed.json()).toMatchObject({ error: { type: 'rate_limited', code: 'rate_limited' } });

    // The operator, from an address that is not locked out, is served; once the token is in use, a shared
    // address's lockout no longer locks the operator out (as a merchant's key in use).
    expect((await as('203.0.113.7', ADMIN_TOKEN)).status).toBe(200);
    expect((await as(guesser, ADMIN_TOKEN)).status).toBe(200);
  });
});
