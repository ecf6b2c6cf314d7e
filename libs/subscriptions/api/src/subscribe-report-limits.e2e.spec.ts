import { Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createHttpApp } from '@stablepay/http';
import { HostedSubscribeController } from './hosted/hosted-subscribe.controller';
import { SubscribeReportLimits, SUBSCRIBE_REPORTS_IN_FLIGHT } from './subscribe-report-limits';
import { SUBSCRIPTION_CHECKOUTS } from './subscription-checkouts.port';
import { SubscribeController } from './subscriptions.controller';
import { type SubscribeInput, SUBSCRIPTIONS_USE_CASES } from './subscriptions.port';

/**
 * The public subscribe report (POST /subscription-checkouts/:id/subscribe with `tx_hash`, and the hosted page's copy)
 * over real HTTP, with a use case that holds each report until the test lets it go: reports in flight are bounded
 * per intent and per source address, past either 429 `rate_limited` in the envelope with Retry-After.
 */
const intent = (n: number) => `schk_${String(n).padStart(26, '0')}`;
const body = (txHash?: string) => ({
  chain: 'eip155:8453',
  asset: 'eip155:8453/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913',
  subscriber: '0x1111111111111111111111111111111111111111',
  ...(txHash ? { tx_hash: txHash } : {}),
});
const TX = `0x${'ab'.repeat(32)}`;

/** Reports wait here until released; an authorization answers at once. */
const waiting: Array<() => void> = [];
const calls: Array<{ id: string; input: SubscribeInput }> = [];
const useCases = {
  subscribe: async (id: string, input: SubscribeInput) => {
    calls.push({ id, input });
    if (!input.txHash) return { object: 'subscribe_authorization', subscription_checkout_id: id };
    await new Promise<void>((resolve) => waiting.push(resolve));
    return { object: 'subscribe_result', status: 'pending', subscription_checkout_id: id };
  },
};
/** Every report sent, awaited after each test so none outlives it. */
const sentAll: Array<Promise<Response>> = [];
const releaseAll = () => {
  for (const release of waiting.splice(0)) release();
};

describe('subscribe reports in flight (per intent, per source)', () => {
  let app: NestFastifyApplication;
  let base: string;

  beforeAll(async () => {
    @Module({
      controllers: [SubscribeController, HostedSubscribeController],
      providers: [
        { provide: SUBSCRIPTIONS_USE_CASES, useValue: useCases },
        { provide: SUBSCRIPTION_CHECKOUTS, useValue: {} },
        SubscribeReportLimits,
      ],
    })
    class TestModule {}
    app = await createHttpApp(TestModule, { service: 'test', logLevel: 'fatal' });
    await app.listen(0, '127.0.0.1');
    const address = app.getHttpServer().address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });

  afterEach(async () => {
    releaseAll();
    await Promise.allSettled(sentAll.splice(0));
    calls.length = 0;
  });

  afterAll(async () => {
    releaseAll();
    await app?.close();
  });

  const post = (path: string, payload: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });

  /** Sends `n` reports of `id` and resolves once the use case holds each that was let through. */
  async function holdReports(paths: string[]): Promise<{ answers: () => Promise<Response[]> }> {
    const before = waiting.length;
    const sent = paths.map((p) => post(p, body(TX)));
    // Every request either reaches the use case (and waits there) or is answered: wait for both to add up.
    const answered: Response[] = [];
    for (const s of sent) void s.then((r) => answered.push(r));
    for (let i = 0; i < 100_000 && waiting.length - before + answered.length < paths.length; i++)
      await new Promise((resolve) => setImmediate(resolve));
    expect(waiting.length - before + answered.length).toBe(paths.length);
    sentAll.push(...sent);
    return { answers: () => Promise.all(sent) };
  }

  it(`lets ${SUBSCRIBE_REPORTS_IN_FLIGHT.perIntent} reports of one intent run at once; the next is 429 with Retry-After, through either route`, async () => {
    const id = intent(1);
    const held = await holdReports([
      `/subscription-checkouts/${id}/subscribe`,
      `/hosted/subscribe/${id}/subscribe`,
    ]);
    expect(waiting).toHaveLength(SUBSCRIBE_REPORTS_IN_FLIGHT.perIntent);
    for (const path of [`/subscription-checkouts/${id}/subscribe`, `/hosted/subscribe/${id}/subscribe`]) {
      const refused = await post(path, body(TX));
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(await refused.json()).toMatchObject({
        error: {
          type: 'rate_limited',
          code: 'rate_limited',
          message: expect.stringMatching(/subscription checkout/),
        },
      });
    }
    // An authorization (no tx_hash) reads no receipt: not bounded.
    expect((await post(`/subscription-checkouts/${id}/subscribe`, body())).status).toBe(200);
    // Another intent from the same source is served.
    await holdReports([`/subscription-checkouts/${intent(2)}/subscribe`]);
    expect(waiting).toHaveLength(3);
    releaseAll();
    expect((await held.answers()).map((r) => r.status)).toEqual([202, 202]);
    // Answered: the slots are free again.
    await holdReports([`/subscription-checkouts/${id}/subscribe`]);
    expect(calls.filter((c) => c.id === id && c.input.txHash)).toHaveLength(3);
  });

  it(`lets one source run ${SUBSCRIBE_REPORTS_IN_FLIGHT.perSource} reports at once across intents; the next is 429`, async () => {
    const paths = Array.from(
      { length: SUBSCRIBE_REPORTS_IN_FLIGHT.perSource },
      (_, i) => `/subscription-checkouts/${intent(100 + i)}/subscribe`,
    );
    await holdReports(paths);
    expect(waiting).toHaveLength(SUBSCRIBE_REPORTS_IN_FLIGHT.perSource);
    const refused = await post(`/hosted/subscribe/${intent(200)}/subscribe`, body(TX));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await refused.json()).toMatchObject({
      error: { type: 'rate_limited', code: 'rate_limited', message: expect.stringMatching(/this address/) },
    });
    // The refused one took no slot of its intent: once the source has room, it is served.
    releaseAll();
    await holdReports([`/hosted/subscribe/${intent(200)}/subscribe`]);
    expect(waiting).toHaveLength(1);
  });
});
