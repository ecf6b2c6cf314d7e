import { Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createHttpApp } from '@stablepay/http';
import { SubscriptionsController } from './subscriptions.controller';
import { SUBSCRIPTIONS_USE_CASES } from './subscriptions.port';

/**
 * SPEC's older listing shows `POST /subscriptions` and `GET /subscriptions`, which the current model has not (a
 * subscription is created only through a subscription checkout). Over real HTTP, a client of that listing calling
 * them on the main surface learns the routes to use (410), not a bare 404 `route_not_found`.
 */
describe('the older listing subscription routes on the main surface', () => {
  let app: NestFastifyApplication;
  let base: string;

  beforeAll(async () => {
    @Module({
      controllers: [SubscriptionsController],
      providers: [{ provide: SUBSCRIPTIONS_USE_CASES, useValue: {} }],
    })
    class TestModule {}
    app = await createHttpApp(TestModule, { service: 'test', logLevel: 'fatal' });
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  });

  afterAll(async () => {
    await app?.close();
  });

  it.each([
    ['POST', '/subscriptions', '{}'],
    ['GET', '/subscriptions', undefined],
    ['GET', '/subscriptions?limit=10', undefined],
  ])(
    '%s %s answers 410 subscriptions_use_subscription_checkouts naming the routes to use',
    async (method, path, body) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body,
      });
      expect({ status: res.status, body: await res.json() }).toEqual({
        status: 410,
        body: {
          error: {
            type: 'invalid_request',
            code: 'subscriptions_use_subscription_checkouts',
            message: expect.stringContaining('POST /subscription-checkouts'),
          },
        },
      });
    },
  );
});
