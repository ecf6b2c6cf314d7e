import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DatabaseModule } from '@stablepay/database';
import {
  createHttpApp,
  IDEMPOTENCY_CLOCK,
  IDEMPOTENCY_MIGRATIONS,
  IdempotencyInterceptor,
} from '@stablepay/http';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { systemClock } from '@stablepay/util';
import { SubscribeReportLimits } from './subscribe-report-limits';
import { SubscribeController } from './subscriptions.controller';
import { type SubscribeInput, SUBSCRIPTIONS_USE_CASES } from './subscriptions.port';

/**
 * The public subscribe report with an Idempotency-Key, over real HTTP and a real database: a report not mined in
 * time (202 `pending`) is not the report's outcome, so the key does not keep it and a retry with the key learns the
 * outcome; the recorded answer is kept and replayed as any other.
 */
const ID = `schk_${'0'.repeat(26)}`;
const TX = `0x${'ab'.repeat(32)}`;
const BODY = {
  chain: 'eip155:8453',
  asset: 'eip155:8453/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913',
  subscriber: '0x1111111111111111111111111111111111111111',
  tx_hash: TX,
};

/** The chain's answers to the reports, in order: not mined yet, then mined and recorded. */
const outcomes: Array<'pending' | 'recorded'> = [];
const reports: SubscribeInput[] = [];
const useCases = {
  subscribe: async (id: string, input: SubscribeInput) => {
    reports.push(input);
    return {
      object: 'subscribe_result',
      status: outcomes.shift() ?? 'recorded',
      subscription_checkout_id: id,
      tx_hash: TX,
      subscription: null,
    };
  },
};

describe('the subscribe report with an Idempotency-Key', () => {
  let db: TestDatabase;
  let app: NestFastifyApplication;
  let base: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    @Module({
      imports: [DatabaseModule.forRoot({ url: db.url, migrations: IDEMPOTENCY_MIGRATIONS })],
      controllers: [SubscribeController],
      providers: [
        { provide: SUBSCRIPTIONS_USE_CASES, useValue: useCases },
        SubscribeReportLimits,
        { provide: IDEMPOTENCY_CLOCK, useValue: systemClock },
        { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor },
      ],
    })
    class TestModule {}
    app = await createHttpApp(TestModule, { service: 'test', logLevel: 'fatal' });
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const report = async () => {
    const res = await fetch(`${base}/subscription-checkouts/${ID}/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'report-once' },
      body: JSON.stringify(BODY),
    });
    const body = (await res.json()) as { status?: string };
    return { status: res.status, replayed: res.headers.get('idempotent-replayed'), outcome: body.status };
  };

  it('a 202 pending is not kept: the retry with the key asks again and gets the recorded outcome, which is kept', async () => {
    outcomes.push('pending', 'recorded');
    expect(await report()).toEqual({ status: 202, replayed: null, outcome: 'pending' });
    expect(await report()).toEqual({ status: 200, replayed: null, outcome: 'recorded' });
    expect(await report()).toEqual({ status: 200, replayed: 'true', outcome: 'recorded' });
    expect(reports).toHaveLength(2);
  });
});
