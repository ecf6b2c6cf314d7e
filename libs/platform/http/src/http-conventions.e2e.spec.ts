import { Body, Controller, Get, HttpCode, Module, Param, Post, Req, Res } from '@nestjs/common';
import { APP_GUARD, APP_INTERCEPTOR } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { IsOptional, IsString, Matches } from 'class-validator';
import { Client } from 'pg';
import type { QueryRunner } from 'typeorm';
import { createTestDatabase, requestWithRawHeaders, type TestDatabase } from '@stablepay/testing';
import { DatabaseModule } from '@stablepay/database';
import { cannotProcess, conflict, HOUR, ManualClock, notFound } from '@stablepay/util';
import { hashApiKey } from './api-key';
import {
  API_KEY_RESOLVER,
  ApiKeyGuard,
  type ApiKeyResolver,
  type AuthenticatedMerchant,
  CurrentMerchant,
  Public,
} from './auth';
import { HealthModule, ReadinessRegistry } from './health';
import { createHttpApp } from './http-app';
import {
  AddIdempotencyClaimOwners1795449600777,
  AddIdempotencyKeyGenerations1795536000300,
  AddIdempotencyResponseLocation1795536000400,
  AnswersSecret,
  IDEMPOTENCY_CLOCK,
  RELEASED_SHIFT,
  IDEMPOTENCY_MIGRATIONS,
  IdempotencyInterceptor,
} from './idempotency.interceptor';
import { IDEMPOTENCY_PRUNE_CONFIG, IdempotencyKeyPruner } from './idempotency-pruner';
import { idempotencyClaimedAtOf, idempotencyKeyOf } from './request-origin';

const KEY_A = 'sk_test_' + 'a'.repeat(32);
const KEY_B = 'sk_live_' + 'b'.repeat(32);

class WidgetDto {
  @IsString()
  @Matches(/^[a-z]+$/, { message: 'name must be lowercase letters' })
  name!: string;

  @IsOptional()
  @IsString()
  colour?: string;
}

let executions = 0;
/** Names whose next execution is refused with a 409 (a state that passes: the same request may run later). */
const refuseNow = new Set<string>();
/** Names whose next command fails with a 500 after it ran (its effect saved, the answer lost). */
const failAfterRunning = new Set<string>();
/** Executions the test holds: the next request of a name waits for its gate, then fails (a 500) when asked. */
const held = new Map<string, Array<{ reached: () => void; wait: Promise<void>; fail: boolean }>>();

@Controller('widgets')
class WidgetController {
  @Post()
  @HttpCode(201)
  async create(@Body() body: WidgetDto, @CurrentMerchant() merchant: AuthenticatedMerchant) {
    executions++;
    const hold = held.get(body.name)?.shift();
    if (hold) {
      hold.reached();
      await hold.wait;
      if (hold.fail) throw new Error('the command timed out');
    }
    await new Promise((r) => setTimeout(r, 50));
    if (body.name === 'forbidden') throw cannotProcess('widget_forbidden', 'That widget is not allowed.');
    if (refuseNow.delete(body.name)) throw conflict('widget_busy', 'Another widget is still being made.');
    return {
      object: 'widget',
      name: body.name,
      merchant: merchant.merchantId,
      mode: merchant.mode,
      n: executions,
    };
  }

  @Get(':id')
  get(@Param('id') id: string) {
    throw notFound('widget', id);
  }

  @Public()
  @Get()
  crash(): never {
    throw new Error('secret internal detail');
  }
}

/** Answers the command id its effects would derive from (what creates, charges and payment actions use). */
@Controller('commands')
class CommandController {
  @Post()
  @HttpCode(201)
  run(@Body() body: WidgetDto, @Req() request: FastifyRequest) {
    executions++;
    if (refuseNow.delete(body.name))
      throw conflict('widget_busy', `Another widget is still being made (${idempotencyKeyOf(request)}).`);
    if (failAfterRunning.delete(body.name)) throw new Error('the owner did not answer in time');
    return {
      object: 'command',
      command: idempotencyKeyOf(request) ?? null,
      claimed_at: idempotencyClaimedAtOf(request)?.toISOString() ?? null,
      n: executions,
    };
  }
}

/** Answers a secret (as the merchant create and the webhook secret rotation do). */
@Controller('secrets')
class SecretController {
  @Post()
  @HttpCode(201)
  @AnswersSecret()
  issue() {
    executions++;
    return { object: 'secret', secret: `tok_${executions}` };
  }
}

/** A form post answered with a redirect (as the hosted pages' dismiss and KYC steps are). */
@Public()
@Controller('forms')
class FormController {
  @Post(['', ':id'])
  @HttpCode(303)
  submit(@Res({ passthrough: true }) reply: FastifyReply) {
    executions++;
    void reply
      .header('location', `../done-${executions}`)
      .header('content-type', 'text/plain; charset=utf-8');
    return 'See Other';
  }
}

const resolver: ApiKeyResolver = {
  resolve: async (hash) => {
    if (hash === hashApiKey(KEY_A)) return { merchantId: 'mer_a', mode: 'test', keyHash: hash };
    if (hash === hashApiKey(KEY_B)) return { merchantId: 'mer_b', mode: 'live', keyHash: hash };
    return null;
  },
};

describe('HTTP conventions (real Fastify server, real database)', () => {
  let db: TestDatabase;
  let app: NestFastifyApplication;
  let base: string;
  const clock = new ManualClock('2026-03-01T00:00:00Z');

  beforeAll(async () => {
    db = await createTestDatabase();
    @Module({
      imports: [
        DatabaseModule.forRoot({
          url: db.url,
          migrations: IDEMPOTENCY_MIGRATIONS,
        }),
        HealthModule,
      ],
      controllers: [WidgetController, CommandController, SecretController, FormController],
      providers: [
        { provide: API_KEY_RESOLVER, useValue: resolver },
        { provide: APP_GUARD, useClass: ApiKeyGuard },
        { provide: IDEMPOTENCY_CLOCK, useValue: clock },
        { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor },
        // Run by the tests (prune()), never by its timer; two rows a batch, so a few rows take several.
        {
          provide: IDEMPOTENCY_PRUNE_CONFIG,
          useValue: { retentionMs: 48 * HOUR, intervalMs: 24 * HOUR, batch: 2 },
        },
        IdempotencyKeyPruner,
      ],
    })
    class TestModule {}
    app = await createHttpApp(TestModule, { service: 'test', logLevel: 'fatal', bodyLimit: 1024 });
    app.get(ReadinessRegistry).register('always', async () => undefined);
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  /** Holds the next execution of `name`: `reached` once it runs, `finish` lets it go on (or fail). */
  const holdNext = (name: string, fail = false) => {
    let reached: () => void = () => undefined;
    let finish: () => void = () => undefined;
    const hold = {
      reached: new Promise<void>((resolve) => (reached = resolve)),
      wait: new Promise<void>((resolve) => (finish = resolve)),
    };
    held.set(name, [...(held.get(name) ?? []), { reached, wait: hold.wait, fail }]);
    return { reached: hold.reached, finish };
  };
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${base}/widgets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json', ...headers },
      body,
    });

  it('answers /health and /ready without an API key', async () => {
    expect(await (await fetch(`${base}/health`)).json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${base}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { always: 'ok' } });
  });

  it('refuses a missing, malformed or unknown key with 401 in the envelope', async () => {
    for (const auth of [undefined, 'Basic abc', 'Bearer sk_test_short', `Bearer sk_test_${'z'.repeat(32)}`]) {
      const res = await fetch(`${base}/widgets/w1`, { headers: auth ? { authorization: auth } : {} });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({
        error: { type: 'authentication_error', code: 'invalid_api_key' },
      });
    }
  });

  it('tells a key sent as x-api-key on a bearer route which header the route takes', async () => {
    const res = await fetch(`${base}/widgets/w1`, { headers: { 'x-api-key': KEY_A } });
    expect(res.status).toBe(401);
    const { error } = (await res.json()) as { error: { type: string; code: string; message: string } };
    expect(error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
    expect(error.message).toContain('x-api-key header is taken only by the payment-request surface');
    expect(error.message).toContain('Authorization: Bearer');
  });

  it('serves request metrics by route pattern (never the raw URL) and the process metrics on /metrics', async () => {
    await fetch(`${base}/widgets/w-metrics-1`, { headers: { authorization: `Bearer ${KEY_A}` } });
    await fetch(`${base}/widgets/w-metrics-2`, { headers: { authorization: `Bearer ${KEY_A}` } });
    await fetch(`${base}/no-such-route/123`, { headers: { authorization: `Bearer ${KEY_A}` } });
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    const count = (labels: string) =>
      Number(new RegExp(`^stablepay_http_requests_total\\{${labels}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? '0');
    expect(count('method="GET",route="/widgets/:id",status="404",status_class="4xx"')).toBeGreaterThanOrEqual(
      2,
    );
    expect(count('method="GET",route="unmatched",status="404",status_class="4xx"')).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain('w-metrics-1');
    expect(text).not.toContain('no-such-route');
    expect(text).toMatch(
      /^stablepay_http_request_duration_seconds_count\{method="GET",route="\/widgets\/:id",status_class="4xx"\} \d+$/m,
    );
    expect(text).toMatch(/^stablepay_process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^stablepay_nodejs_eventloop_lag_seconds \d/m);
  });

  it('maps a missing route to a 404 envelope', async () => {
    const res = await fetch(`${base}/nope`, { headers: { authorization: `Bearer ${KEY_A}` } });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { type: 'invalid_request', code: 'route_not_found' } });
  });

  it('maps a domain not-found to a 404 envelope with param', async () => {
    const res = await fetch(`${base}/widgets/w1`, { headers: { authorization: `Bearer ${KEY_A}` } });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      error: {
        type: 'invalid_request',
        code: 'resource_missing',
        param: 'id',
        message: "No such widget: 'w1'",
      },
    });
  });

  it('maps malformed JSON to 400 invalid_json and an oversized body to 413', async () => {
    const bad = await post('{"name":');
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { type: 'invalid_request', code: 'invalid_json' } });
    const big = await post(JSON.stringify({ name: 'x'.repeat(5000) }));
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ error: { code: 'request_too_large' } });
  });

  it('maps DTO failures to 400 validation_error with param, unknown fields included', async () => {
    const res = await post(JSON.stringify({ name: 'UPPER' }));
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        type: 'validation_error',
        param: 'name',
        code: 'parameter_invalid',
        message: 'name must be lowercase letters',
      },
    });
    const unknown = await post(JSON.stringify({ name: 'ok', price: '1' }));
    expect(await unknown.json()).toMatchObject({
      error: { type: 'validation_error', param: 'price', code: 'unknown_parameter' },
    });
  });

  it('hides internal errors behind a 500 api_error', async () => {
    const res = await fetch(`${base}/widgets`);
    expect(res.status).toBe(500);
    const body = (await res.json()) as { error: { type: string; message: string } };
    expect(body.error.type).toBe('api_error');
    expect(JSON.stringify(body)).not.toContain('secret internal detail');
  });

  describe('Idempotency-Key', () => {
    it('replays the first response to a retry with the same key and parameters', async () => {
      const first = await post(JSON.stringify({ name: 'alpha', colour: 'red' }), {
        'idempotency-key': 'k-replay',
      });
      expect(first.status).toBe(201);
      const firstBody = await first.json();
      const again = await post(JSON.stringify({ colour: 'red', name: 'alpha' }), {
        'idempotency-key': 'k-replay',
      });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.json()).toEqual(firstBody);
    });

    it('refuses the same key with other parameters: 400 idempotency_key_reused', async () => {
      await post(JSON.stringify({ name: 'beta' }), { 'idempotency-key': 'k-reuse' });
      const res = await post(JSON.stringify({ name: 'gamma' }), { 'idempotency-key': 'k-reuse' });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        error: { type: 'invalid_request', code: 'idempotency_key_reused' },
      });
    });

    it('refuses two Idempotency-Key headers (Node would join them into "a, b"): 400 invalid_idempotency_key, nothing run or claimed', async () => {
      const before = executions;
      const res = await requestWithRawHeaders(
        `${base}/widgets`,
        'POST',
        ['Authorization', `Bearer ${KEY_A}`, 'Idempotency-Key', 'k-twice-a', 'Idempotency-Key', 'k-twice-b'],
        { name: 'twice' },
      );
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error: { type: 'invalid_request', code: 'invalid_idempotency_key', param: 'Idempotency-Key' },
      });
      expect(executions).toBe(before);
      const sql = new Client({ connectionString: db.url });
      await sql.connect();
      try {
        const rows = await sql.query("SELECT key FROM idempotency_keys WHERE key LIKE 'k-twice%'");
        expect(rows.rows).toEqual([]);
      } finally {
        await sql.end();
      }
      // One key, once, still runs.
      const once = await post(JSON.stringify({ name: 'twice' }), { 'idempotency-key': 'k-twice-a' });
      expect(once.status).toBe(201);
    });

    it('never executes two concurrent requests with one key', async () => {
      const before = executions;
      const results = await Promise.all(
        Array.from({ length: 8 }, () =>
          post(JSON.stringify({ name: 'delta' }), { 'idempotency-key': 'k-concurrent' }),
        ),
      );
      // Exactly one execution. The others either saw it in flight (409) or, on a slow machine, arrived after it
      // finished and got its stored response replayed: never a second execution with a different result.
      expect(executions - before).toBe(1);
      const bodies = await Promise.all(
        results.map(async (r) => ({
          status: r.status,
          replayed: r.headers.get('idempotent-replayed'),
          body: await r.text(),
        })),
      );
      expect(bodies.every((b) => b.status === 201 || b.status === 409)).toBe(true);
      const created = bodies.filter((b) => b.status === 201);
      expect(created.filter((b) => b.replayed === null)).toHaveLength(1);
      // Replays are byte-identical to the original response.
      expect(new Set(created.map((b) => b.body)).size).toBe(1);
    });

    it('keys are per merchant: another merchant may use the same key', async () => {
      await post(JSON.stringify({ name: 'eps' }), { 'idempotency-key': 'k-shared' });
      const other = await post(JSON.stringify({ name: 'zeta' }), {
        'idempotency-key': 'k-shared',
        authorization: `Bearer ${KEY_B}`,
      });
      expect(other.status).toBe(201);
      expect(await other.json()).toMatchObject({ name: 'zeta', merchant: 'mer_b', mode: 'live' });
    });

    it('replays a business error but lets a retry run after a 409 and a corrected retry after a validation error', async () => {
      const failed = await post(JSON.stringify({ name: 'forbidden' }), { 'idempotency-key': 'k-error' });
      expect(failed.status).toBe(422);
      const replay = await post(JSON.stringify({ name: 'forbidden' }), { 'idempotency-key': 'k-error' });
      expect(replay.status).toBe(422);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await replay.json()).toMatchObject({
        error: { type: 'cannot_process', code: 'widget_forbidden' },
      });

      // A 409 refuses for now: the same request with the same key runs once the conflict has passed.
      refuseNow.add('later');
      const busy = await post(JSON.stringify({ name: 'later' }), { 'idempotency-key': 'k-conflict' });
      expect(busy.status).toBe(409);
      expect(await busy.json()).toMatchObject({ error: { code: 'widget_busy' } });
      const later = await post(JSON.stringify({ name: 'later' }), { 'idempotency-key': 'k-conflict' });
      expect(later.status).toBe(201);
      expect(later.headers.get('idempotent-replayed')).toBeNull();

      const invalid = await post(JSON.stringify({ name: 'BAD' }), { 'idempotency-key': 'k-validation' });
      expect(invalid.status).toBe(400);
      const corrected = await post(JSON.stringify({ name: 'good' }), { 'idempotency-key': 'k-validation' });
      expect(corrected.status).toBe(201);
    });

    it("a request without a key skips the interceptor (and Nest's pipeline for it); a keyed POST goes through it", async () => {
      const intercept = jest.spyOn(IdempotencyInterceptor.prototype, 'intercept');
      try {
        const created = await post(JSON.stringify({ name: 'iota' }));
        expect(created.status).toBe(201);
        const invalid = await post(JSON.stringify({ name: 'BAD' }));
        expect(invalid.status).toBe(400);
        expect(await invalid.json()).toMatchObject({ error: { type: 'validation_error', param: 'name' } });
        const missing = await fetch(`${base}/widgets/w_1`, { headers: { authorization: `Bearer ${KEY_A}` } });
        expect(missing.status).toBe(404);
        expect(intercept).not.toHaveBeenCalled();
        const keyed = await post(JSON.stringify({ name: 'iota' }), { 'idempotency-key': 'k-skip' });
        expect(keyed.status).toBe(201);
        expect(intercept).toHaveBeenCalledTimes(1);
      } finally {
        intercept.mockRestore();
      }
    });

    it('a keyed POST costs two statements on its key (claim, complete), a replay two (claim, load)', async () => {
      const statements: string[] = [];
      const original = Client.prototype.query as (...args: unknown[]) => unknown;
      const spy = jest.spyOn(Client.prototype, 'query').mockImplementation(function (
        this: Client,
        ...args: unknown[]
      ) {
        const first = args[0];
        const text = typeof first === 'string' ? first : (first as { text?: string } | null)?.text;
        if (typeof text === 'string' && text.includes('idempotency_keys')) statements.push(text);
        return original.apply(this, args);
      } as typeof Client.prototype.query);
      try {
        const first = await post(JSON.stringify({ name: 'theta' }), { 'idempotency-key': 'k-statements' });
        expect(first.status).toBe(201);
        expect(statements.map((t) => t.trim().split(/\s+/)[0])).toEqual(['INSERT', 'UPDATE']);
        statements.length = 0;
        const again = await post(JSON.stringify({ name: 'theta' }), { 'idempotency-key': 'k-statements' });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(statements.map((t) => t.trim().split(/\s+/)[0])).toEqual(['INSERT', 'SELECT']);
      } finally {
        spy.mockRestore();
      }
    });

    it('a claim left in flight by a request whose process died: 409 with Retry-After, then the same request runs again after the lease (another request with the key still refused)', async () => {
      const first = await post(JSON.stringify({ name: 'iota' }), { 'idempotency-key': 'k-crashed' });
      const firstBody = (await first.json()) as { n: number };
      // What kill -9 between the claim and its completion leaves: the row still in flight, no response stored.
      const sql = new Client({ connectionString: db.url });
      await sql.connect();
      try {
        const updated = await sql.query(
          "UPDATE idempotency_keys SET state = 'in_flight', response_status = NULL, response_body = NULL WHERE key = 'k-crashed'",
        );
        expect(updated.rowCount).toBe(1);
      } finally {
        await sql.end();
      }
      const early = await post(JSON.stringify({ name: 'iota' }), { 'idempotency-key': 'k-crashed' });
      expect(early.status).toBe(409);
      expect(await early.json()).toMatchObject({ error: { code: 'idempotency_key_in_use' } });
      // The claim names its owner (this live process): a retry is worth trying once a dead owner's beats would
      // have stopped for 30 s (plus a beat), not only after the 10-minute lease.
      expect(Number(early.headers.get('retry-after'))).toBe(35);

      clock.advance(10 * 60 * 1000 + 1);
      const other = await post(JSON.stringify({ name: 'kappa' }), { 'idempotency-key': 'k-crashed' });
      expect(other.status).toBe(400);
      expect(await other.json()).toMatchObject({ error: { code: 'idempotency_key_reused' } });
      const retried = await post(JSON.stringify({ name: 'iota' }), { 'idempotency-key': 'k-crashed' });
      expect(retried.status).toBe(201);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(((await retried.json()) as { n: number }).n).toBeGreaterThan(firstBody.n);
      const replay = await post(JSON.stringify({ name: 'iota' }), { 'idempotency-key': 'k-crashed' });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
    });

    it("a claim whose process stopped beating (or is gone) is taken over at once by the same request, not after the lease; a live process's claim is not", async () => {
      const names: Record<string, string> = {
        'k-owner-live': 'rho',
        'k-owner-stopped': 'sigma',
        'k-owner-gone': 'tau',
      };
      const body = (key: string) => JSON.stringify({ name: names[key] });
      const crash = async (key: string, owner: string, beat: string | null) => {
        const first = await post(body(key), { 'idempotency-key': key });
        expect(first.status).toBe(201);
        // What kill -9 of another gateway between the claim and its completion leaves.
        const sql = new Client({ connectionString: db.url });
        await sql.connect();
        try {
          await sql.query(
            "UPDATE idempotency_keys SET state = 'in_flight', response_status = NULL, response_body = NULL, owner = $2 WHERE key = $1",
            [key, owner],
          );
          if (beat !== null)
            await sql.query(
              `INSERT INTO idempotency_owners (owner, beat_at) VALUES ($1, now() - interval '${beat}')`,
              [owner],
            );
        } finally {
          await sql.end();
        }
        return ((await first.json()) as { n: number }).n;
      };
      const live = await crash('k-owner-live', 'owner-live', '1 second');
      const stopped = await crash('k-owner-stopped', 'owner-stopped', '1 minute');
      const gone = await crash('k-owner-gone', 'owner-gone', null);

      // A claim younger than 30 s is never judged dead: its owner's first beat may not be visible yet.
      const young = await post(body('k-owner-stopped'), { 'idempotency-key': 'k-owner-stopped' });
      expect(young.status).toBe(409);
      clock.advance(31_000);

      const waiting = await post(body('k-owner-live'), { 'idempotency-key': 'k-owner-live' });
      expect(waiting.status).toBe(409);
      expect(await waiting.json()).toMatchObject({ error: { code: 'idempotency_key_in_use' } });
      expect(live).toBeGreaterThan(0);

      for (const [key, n] of [
        ['k-owner-stopped', stopped],
        ['k-owner-gone', gone],
      ] as const) {
        const other = await post(JSON.stringify({ name: 'other' }), { 'idempotency-key': key });
        expect(other.status).toBe(400);
        expect(await other.json()).toMatchObject({ error: { code: 'idempotency_key_reused' } });
        const retried = await post(body(key), { 'idempotency-key': key });
        expect(retried.status).toBe(201);
        expect(retried.headers.get('idempotent-replayed')).toBeNull();
        expect(((await retried.json()) as { n: number }).n).toBeGreaterThan(n);
        const replay = await post(body(key), { 'idempotency-key': key });
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
      }
    });

    it('the owners migration applied again (pods of every service starting at once) finds its work done', async () => {
      const sql = new Client({ connectionString: db.url });
      await sql.connect();
      try {
        const runner = { query: (text: string) => sql.query(text) } as unknown as QueryRunner;
        await expect(new AddIdempotencyClaimOwners1795449600777().up(runner)).resolves.toBeUndefined();
        await expect(new AddIdempotencyKeyGenerations1795536000300().up(runner)).resolves.toBeUndefined();
        await expect(new AddIdempotencyResponseLocation1795536000400().up(runner)).resolves.toBeUndefined();
      } finally {
        await sql.end();
      }
    });

    it.each([
      ['completes', false],
      ['fails with a 500', true],
    ])(
      'a request that outlived the lease and then %s leaves the claim of the retry that took it over alone',
      async (_, outlivedFails) => {
        const name = outlivedFails ? 'nu' : 'mu';
        const key = { 'idempotency-key': `k-outlived-${name}` };
        const outlived = holdNext(name, outlivedFails);
        const retry = holdNext(name);
        try {
          const first = post(JSON.stringify({ name }), key);
          await outlived.reached;
          clock.advance(10 * 60 * 1000 + 1);
          const retried = post(JSON.stringify({ name }), key);
          await retry.reached;

          outlived.finish();
          expect((await first).status).toBe(outlivedFails ? 500 : 201);
          // Its completion or release matched its own claim only: the retry's claim still holds the key.
          const meanwhile = await post(JSON.stringify({ name }), key);
          expect(meanwhile.status).toBe(409);
          expect(await meanwhile.json()).toMatchObject({ error: { code: 'idempotency_key_in_use' } });

          retry.finish();
          const retriedResponse = await retried;
          expect(retriedResponse.status).toBe(201);
          const retriedBody = await retriedResponse.text();
          const replay = await post(JSON.stringify({ name }), key);
          expect(replay.headers.get('idempotent-replayed')).toBe('true');
          expect(await replay.text()).toBe(retriedBody);
        } finally {
          // Held requests let go even when an expectation failed, so the app closes.
          outlived.finish();
          retry.finish();
        }
      },
    );

    it('a key used again after its 24 hours runs under a new command id (its next generation), which its replays and released retries keep', async () => {
      const command = (name: string) => keyed('k-generation', name);
      const first = await command('gen');
      expect(first.status).toBe(201);
      // A new key's first generation is named by its minute, never the key alone (a pruned key's would be too).
      expect(first.body.command).toMatch(/^k-generation\u2192\d+$/);
      clock.advance(24 * 3600 * 1000 + 1);
      // The same request a day later: a new one (Stripe), not the first one's effects answered again as new.
      const later = await command('gen');
      expect([later.status, later.replayed]).toEqual([201, null]);
      expect(later.body.command).not.toBe('k-generation');
      expect(await command('gen')).toMatchObject({ status: 201, replayed: 'true', body: later.body });
      clock.advance(24 * 3600 * 1000 + 1);
      // A refusal that passes (409, not kept) leaves the key to its retry within the same generation.
      refuseNow.add('again');
      const refused = await command('again');
      expect([refused.status, refused.body.error?.code]).toEqual([409, 'widget_busy']);
      const retried = await command('again');
      expect([retried.status, retried.replayed]).toEqual([201, null]);
      expect(retried.body.command).not.toBe('k-generation');
      expect(retried.body.command).not.toBe(later.body.command);
      // The retry was the first run of this generation: a fourth day brings a fourth id.
      clock.advance(24 * 3600 * 1000 + 1);
      const fourth = await command('again');
      expect(
        new Set([first.body.command, later.body.command, retried.body.command, fourth.body.command]).size,
      ).toBe(4);
    });

    /** A keyed POST /commands: its status, Idempotent-Replayed and body (the command id its effects derive from). */
    const keyed = async (key: string, name: string) => {
      const res = await fetch(`${base}/commands`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEY_A}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify({ name }),
      });
      const body = (await res.json()) as {
        command?: string;
        claimed_at?: string;
        error?: { code: string; message: string };
      };
      return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body };
    };
    const withSql = async <T>(run: (sql: Client) => Promise<T>): Promise<T> => {
      const sql = new Client({ connectionString: db.url });
      await sql.connect();
      try {
        return await run(sql);
      } finally {
        await sql.end();
      }
    };

    it('leaves the time it claimed the key on the request (its clock), and a takeover of an expired claim its own', async () => {
      const claimedAt = clock.now().toISOString();
      const first = await keyed('k-claimed-at', 'claimed');
      expect(first).toMatchObject({ status: 201, body: { claimed_at: claimedAt } });
      // What kill -9 between the claim and its completion leaves; its retry takes the claim over after the lease.
      await withSql((sql) =>
        sql.query(
          "UPDATE idempotency_keys SET state = 'in_flight', response_status = NULL, response_body = NULL WHERE key = 'k-claimed-at'",
        ),
      );
      clock.advance(10 * 60 * 1000 + 1);
      const takenOver = await keyed('k-claimed-at', 'claimed');
      expect(takenOver).toMatchObject({
        status: 201,
        replayed: null,
        body: { command: first.body.command, claimed_at: clock.now().toISOString() },
      });
    });

    it("a key used again after its row was pruned makes a new command id, never its first use's (also for a claim of the version before)", async () => {
      const first = await keyed('k-pruned', 'pruned');
      expect([first.status, first.replayed]).toEqual([201, null]);
      clock.advance(48 * HOUR + 1);
      await app.get(IdempotencyKeyPruner).prune();
      const left = await withSql((sql) => sql.query(`SELECT 1 FROM idempotency_keys WHERE key = 'k-pruned'`));
      expect(left.rowCount).toBe(0);
      // With the row gone nothing of the key is left; its next use is still a new request, not the first answered.
      const later = await keyed('k-pruned', 'pruned');
      expect([later.status, later.replayed]).toEqual([201, null]);
      expect(later.body.command).not.toBe(first.body.command);
      expect(await keyed('k-pruned', 'pruned')).toMatchObject({ replayed: 'true', body: later.body });

      // A gateway of the version before (a rolling deploy) inserts without a generation and reads the column's.
      clock.advance(48 * HOUR + 1);
      await app.get(IdempotencyKeyPruner).prune();
      const previousClaim = `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at, owner)
        VALUES ($1, $2, $3, 'in_flight', $4, NULL)
        ON CONFLICT (scope, key) DO NOTHING
        RETURNING generation`;
      const taken = await withSql((sql) =>
        sql.query<{ generation: number }>(previousClaim, ['mer_a:test', 'k-pruned', 'any-hash', clock.now()]),
      );
      expect(taken.rows).toHaveLength(1);
      expect(taken.rows[0]?.generation).toBeGreaterThan(1);
    });

    it('a retry within the window finds what its first attempt saved, pruning or not: a released key and a claim whose process died', async () => {
      refuseNow.add('lost');
      const refused = await keyed('k-lost-answer', 'lost');
      expect([refused.status, refused.body.error?.code]).toEqual([409, 'widget_busy']);
      const saved = /\((.+)\)/.exec(refused.body.error?.message ?? '')?.[1];
      expect(saved).toMatch(/^k-lost-answer\u2192\d+$/);
      clock.advance(23 * HOUR);
      await app.get(IdempotencyKeyPruner).prune();
      const retried = await keyed('k-lost-answer', 'lost');
      expect([retried.status, retried.replayed]).toEqual([201, null]);
      expect(retried.body.command).toBe(saved);

      // kill -9 between the claim and its completion: the row in flight, its owner gone, nothing answered.
      const crashed = await keyed('k-crash-pruned', 'crash');
      expect(crashed.status).toBe(201);
      await withSql((sql) =>
        sql.query(
          `UPDATE idempotency_keys SET state = 'in_flight', response_status = NULL, response_body = NULL,
             owner = 'a-process-that-died' WHERE key = 'k-crash-pruned'`,
        ),
      );
      clock.advance(10 * 60 * 1000 + 1);
      await app.get(IdempotencyKeyPruner).prune();
      const again = await keyed('k-crash-pruned', 'crash');
      expect([again.status, again.replayed]).toEqual([201, null]);
      expect(again.body.command).toBe(crashed.body.command);
    });

    it('a key released by a 5xx (its effect may be saved) is left to the same request: other parameters are 400 idempotency_key_reused until its 24 hours are over', async () => {
      failAfterRunning.add('first');
      const failed = await keyed('k-5xx', 'first');
      expect(failed.status).toBe(500);
      const ran = executions;
      const other = await keyed('k-5xx', 'second');
      expect([other.status, other.body.error?.code]).toEqual([400, 'idempotency_key_reused']);
      expect(executions).toBe(ran);
      // A refusal of the same request on its retry (a 409, not kept) does not free the key for another.
      refuseNow.add('first');
      expect((await keyed('k-5xx', 'first')).status).toBe(409);
      expect((await keyed('k-5xx', 'second')).body.error?.code).toBe('idempotency_key_reused');
      const retried = await keyed('k-5xx', 'first');
      expect([retried.status, retried.replayed]).toEqual([201, null]);
      expect(retried.body.command).toMatch(/^k-5xx\u2192\d+$/);
      expect(await keyed('k-5xx', 'first')).toMatchObject({
        status: 201,
        replayed: 'true',
        body: retried.body,
      });

      // After its 24 hours the key is a new request whatever its parameters, as after a kept answer.
      failAfterRunning.add('third');
      expect((await keyed('k-5xx-day', 'third')).status).toBe(500);
      clock.advance(24 * HOUR + 1);
      const nextDay = await keyed('k-5xx-day', 'fourth');
      expect([nextDay.status, nextDay.replayed]).toEqual([201, null]);
    });

    it('a key released by a 409 (nothing saved), or after a 5xx by a gateway of the version before, is claimed by any request', async () => {
      refuseNow.add('busy');
      expect((await keyed('k-409-other', 'busy')).status).toBe(409);
      expect((await keyed('k-409-other', 'other')).status).toBe(201);
      // Released after a 5xx by a gateway that did not bind it (no claimable_by): as before, any request.
      await withSql((sql) =>
        sql.query(
          `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at, generation)
           VALUES ('mer_a:test', 'k-released-before', 'the first request', 'released',
                   $1::timestamptz - interval '${RELEASED_SHIFT}', 42)`,
          [clock.now()],
        ),
      );
      expect(await keyed('k-released-before', 'another')).toMatchObject({
        status: 201,
        body: { command: 'k-released-before\u219242' },
      });
    });

    it('pruning deletes only rows whose last claim is past the retention, a batch per statement', async () => {
      const pruner = app.get(IdempotencyKeyPruner);
      await pruner.prune();
      const now = clock.now();
      // [key, state, claimed hours ago]; a released row keeps its claim time moved back by RELEASED_SHIFT.
      const rows: Array<[string, 'done' | 'in_flight' | 'released', number | null]> = [
        ['old-done-1', 'done', 49],
        ['old-done-2', 'done', 72],
        ['old-done-3', 'done', 500],
        ['old-in-flight', 'in_flight', 49],
        ['old-released', 'released', 49],
        ['young-done', 'done', 47],
        ['young-in-flight', 'in_flight', 0],
        ['young-released', 'released', 47],
        ['young-released-now', 'released', 0],
        // Released by the version before: its claim time is unknown, so it is left to its key's next claim.
        ['released-before', 'released', null],
      ];
      await withSql(async (sql) => {
        for (const [key, state, hoursAgo] of rows)
          await sql.query(
            `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at)
             VALUES ('prune-test', $1, 'h', $2, CASE
               WHEN $3::int IS NULL THEN '-infinity'::timestamptz
               WHEN $2 = 'released' THEN $4::timestamptz - make_interval(hours => $3::int) - interval '${RELEASED_SHIFT}'
               ELSE $4::timestamptz - make_interval(hours => $3::int) END)`,
            [key, state, hoursAgo, now],
          );
      });
      expect(await pruner.prune()).toEqual({ rows: 5, batches: 3, dated: 1 });
      const left = await withSql((sql) =>
        sql.query<{ key: string }>(
          `SELECT key FROM idempotency_keys WHERE scope = 'prune-test' ORDER BY key`,
        ),
      );
      expect(left.rows.map((r) => r.key)).toEqual([
        'released-before',
        'young-done',
        'young-in-flight',
        'young-released',
        'young-released-now',
      ]);
      expect(await pruner.prune()).toEqual({ rows: 0, batches: 0, dated: 0 });
    });

    it('a released row without a claim time (a gateway of 5708bdf in a rollout) is dated when the pruner first sees it, keeps its generation for its retry, and is pruned one retention later', async () => {
      const pruner = app.get(IdempotencyKeyPruner);
      await pruner.prune();
      const undated = (key: string) =>
        withSql((sql) =>
          sql.query(
            `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at, generation)
             VALUES ('mer_a:test', $1, 'h', 'released', '-infinity', 7)`,
            [key],
          ),
        );
      const rowOf = (key: string) =>
        withSql(
          async (sql) => (await sql.query(`SELECT 1 FROM idempotency_keys WHERE key = $1`, [key])).rowCount,
        );
      await undated('k-undated-retried');
      await undated('k-undated-left');
      await pruner.prune();
      // Its retry within the day after it was dated is still in its generation.
      clock.advance(23 * HOUR);
      expect(await keyed('k-undated-retried', 'undated')).toMatchObject({
        status: 201,
        body: { command: 'k-undated-retried\u21927' },
      });
      expect(await rowOf('k-undated-left')).toBe(1);
      clock.advance(25 * HOUR + 1);
      await pruner.prune();
      expect(await rowOf('k-undated-left')).toBe(0);
    });

    it('a released row of the version before (generation 1) keeps its command id, the key itself', async () => {
      await withSql((sql) =>
        sql.query(
          `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at, generation)
           VALUES ('mer_a:test', 'k-legacy', 'h', 'released', '-infinity', 1)`,
        ),
      );
      expect(await keyed('k-legacy', 'legacy')).toMatchObject({ status: 201, body: { command: 'k-legacy' } });
    });

    it('an answer carrying a secret is never kept in the clear: without a sealer it is not kept at all, and the retry runs again', async () => {
      const issue = async () => {
        const res = await fetch(`${base}/secrets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY_A}`, 'idempotency-key': 'k-secret' },
        });
        return {
          status: res.status,
          replayed: res.headers.get('idempotent-replayed'),
          body: (await res.json()) as { secret: string },
        };
      };
      const first = await issue();
      expect([first.status, first.replayed]).toEqual([201, null]);
      const sql = new Client({ connectionString: db.url });
      await sql.connect();
      try {
        const kept = await sql.query<{ response_body: string | null }>(
          `SELECT response_body FROM idempotency_keys WHERE key = 'k-secret'`,
        );
        for (const row of kept.rows) expect(row.response_body ?? '').not.toContain(first.body.secret);
      } finally {
        await sql.end();
      }
      const retry = await issue();
      expect([retry.status, retry.replayed]).toEqual([201, null]);
      expect(retry.body.secret).not.toBe(first.body.secret);
    });

    it('replays a redirect with its Location', async () => {
      const submit = async () => {
        const res = await fetch(`${base}/forms`, {
          method: 'POST',
          headers: { 'idempotency-key': 'k-form' },
          redirect: 'manual',
        });
        return {
          status: res.status,
          replayed: res.headers.get('idempotent-replayed'),
          location: res.headers.get('location'),
          text: await res.text(),
        };
      };
      const first = await submit();
      expect(first).toMatchObject({ status: 303, replayed: null, text: 'See Other' });
      expect(first.location).toMatch(/^\.\.\/done-\d+$/);
      expect(await submit()).toEqual({ ...first, replayed: 'true' });
    });

    it("a key sent without an API key belongs to its path: another caller's same key on another page (another capability) is neither refused nor answered", async () => {
      const submit = async (path: string) => {
        const res = await fetch(`${base}${path}`, {
          method: 'POST',
          headers: { 'idempotency-key': 'k-public' },
          redirect: 'manual',
        });
        return { status: res.status, replayed: res.headers.get('idempotent-replayed') };
      };
      expect(await submit('/forms/intent_a')).toEqual({ status: 303, replayed: null });
      // Someone else's page (another capability) with the same key runs.
      expect(await submit('/forms/intent_b')).toEqual({ status: 303, replayed: null });
      expect(await submit('/forms/intent_a')).toEqual({ status: 303, replayed: 'true' });
    });

    it('a released key is taken over, not replayed, by the claim of the version before (a rolling deploy)', async () => {
      // The claim statement gateways ran before released rows existed (frozen here, as an old event shape is).
      const previousClaim = `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at, owner)
        VALUES ($1, $2, $3, 'in_flight', $4, NULL)
        ON CONFLICT (scope, key) DO UPDATE
          SET request_hash = EXCLUDED.request_hash, state = 'in_flight', response_status = NULL,
              response_body = NULL, created_at = EXCLUDED.created_at, owner = EXCLUDED.owner
          WHERE idempotency_keys.created_at < $5
        RETURNING key`;
      refuseNow.add('rolling');
      const refused = await fetch(`${base}/commands`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEY_A}`,
          'content-type': 'application/json',
          'idempotency-key': 'k-rolling',
        },
        body: JSON.stringify({ name: 'rolling' }),
      });
      expect(refused.status).toBe(409);
      const sql = new Client({ connectionString: db.url });
      await sql.connect();
      try {
        const now = clock.now();
        const taken = await sql.query(previousClaim, [
          'mer_a:test',
          'k-rolling',
          'any-hash',
          now,
          new Date(now.getTime() - 24 * 3600 * 1000),
        ]);
        expect(taken.rows).toEqual([{ key: 'k-rolling' }]);
      } finally {
        await sql.end();
      }
    });

    it('forgets a key after 24 hours', async () => {
      const first = await post(JSON.stringify({ name: 'eta' }), { 'idempotency-key': 'k-expiry' });
      const firstBody = (await first.json()) as { n: number };
      clock.advance(24 * 3600 * 1000 + 1);
      const later = await post(JSON.stringify({ name: 'eta' }), { 'idempotency-key': 'k-expiry' });
      expect(later.headers.get('idempotent-replayed')).toBeNull();
      expect(((await later.json()) as { n: number }).n).toBeGreaterThan(firstBody.n);
    });
  });
});
