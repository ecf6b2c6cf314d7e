import { type CanActivate, type ExecutionContext, Injectable, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createHttpApp } from '@stablepay/http';
import { SubscriptionChargesController } from './subscription-charges.controller';
import { SUBSCRIPTION_CHARGES } from './subscription-charges.port';

/** Stands in for the API-key guard: every request is the merchant's. */
@Injectable()
class AsMerchant implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    context.switchToHttp().getRequest<{ merchant?: unknown }>().merchant = {
      merchantId: 'mer_1',
      mode: 'test',
    };
    return true;
  }
}

const charged: unknown[] = [];
const ID = `0x${'ab'.repeat(32)}`;
const BODY = { amount: '1', nonce: 0, signature: `0x${'11'.repeat(65)}` };

/**
 * POST /subscriptions/:id/charge takes `deadline` as a JSON integer (at most 2^53 - 1) or a string of digits
 * (docs/openapi.yaml). Over real HTTP (the JSON parser reads 9007199254740993 as the double 9007199254740992), a
 * number it cannot take is told what is wrong with it, never "must be a string of digits" as if numbers were not
 * taken, and nothing is charged.
 */
describe('the charge deadline sent as a JSON number', () => {
  let app: NestFastifyApplication;
  let base: string;

  beforeAll(async () => {
    @Module({
      controllers: [SubscriptionChargesController],
      providers: [
        { provide: APP_GUARD, useClass: AsMerchant },
        {
          provide: SUBSCRIPTION_CHARGES,
          useValue: {
            quote: () => Promise.reject(new Error('not called')),
            charge: (_m: unknown, _id: string, input: unknown) => {
              charged.push(input);
              return Promise.resolve({ object: 'subscription_charge' });
            },
          },
        },
      ],
    })
    class TestModule {}
    app = await createHttpApp(TestModule, { service: 'test', logLevel: 'fatal' });
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  });

  afterAll(async () => {
    await app?.close();
  });

  const charge = async (deadline: string) => {
    const res = await fetch(`${base}/subscriptions/${ID}/charge`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // Spliced in as written: JSON.stringify would send the double, not the digits a client wrote.
      body: JSON.stringify(BODY).replace(/}$/, `,"deadline":${deadline}}`),
    });
    return { status: res.status, body: (await res.json()) as unknown };
  };

  it.each([
    ['9007199254740993', 'deadline must be at most 9007199254740991.'],
    ['1795570000.5', 'deadline must be Unix seconds: a non-negative integer, or a string of digits'],
    ['-1', 'deadline must be Unix seconds: a non-negative integer, or a string of digits'],
  ])('%s is 400 invalid_deadline saying %j, nothing charged', async (deadline, message) => {
    expect(await charge(deadline)).toEqual({
      status: 400,
      body: {
        error: {
          type: 'validation_error',
          param: 'deadline',
          code: 'invalid_deadline',
          message: expect.stringContaining(message),
        },
      },
    });
    expect(charged).toEqual([]);
  });

  it('an integer deadline is taken', async () => {
    expect((await charge('1795570000')).status).toBe(200);
    expect(charged).toEqual([expect.objectContaining({ deadline: '1795570000' })]);
  });
});
