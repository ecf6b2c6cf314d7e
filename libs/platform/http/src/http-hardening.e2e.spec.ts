import { Body, Controller, Get, HttpCode, Module, Param, Post } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { IsObject, IsOptional, IsString } from 'class-validator';
import { connect, type Socket } from 'node:net';
import * as nodeCrypto from 'node:crypto';
import { hashApiKey } from './api-key';
import { API_KEY_RESOLVER, ApiKeyGuard, type ApiKeyResolver, Public } from './auth';
import { HealthModule, ReadinessRegistry } from './health';
import { IgnoreQueryParameters, QueryParameters } from './query-parameters';
import { createHttpApp, drainHttpApp, type HttpAppOptions } from './http-app';
import { register } from 'prom-client';
import { requestWithRawHeaders } from '@stablepay/testing';
import { DEFAULT_RATE_LIMITS, presentedKeyBudgets, type RateLimits, sourceBudget } from './rate-limits';

const KEY = 'sk_test_' + 'h'.repeat(32);
const OTHER_KEY = 'sk_test_' + 'o'.repeat(32);
const KEY_HASH = hashApiKey(KEY);
const OTHER_KEY_HASH = hashApiKey(OTHER_KEY);

class NoteDto {
  @IsString()
  text!: string;

  @IsOptional()
  @IsObject()
  extra?: Record<string, unknown>;
}

let writes = 0;

@Controller('notes')
class NoteController {
  @Post()
  @HttpCode(201)
  create(@Body() body: NoteDto) {
    writes++;
    return { object: 'note', text: body.text };
  }

  @Get()
  @QueryParameters(['limit', 'starting_after', 'q'])
  list() {
    return { object: 'list', data: [] };
  }

  @Get(':noteId')
  one(@Param('noteId') noteId: string) {
    return { object: 'note', noteId };
  }

  @Get(':noteId/lines/:line')
  @QueryParameters(['q'])
  line(@Param('noteId') noteId: string, @Param('line') line: string) {
    return { object: 'line', noteId, line };
  }
}

/** Holds its requests until the test releases them: a request in flight when the server stops. */
let slowEntered: () => void = () => undefined;
let releaseSlow: () => void = () => undefined;

@Public()
@Controller('slow')
class SlowController {
  @Get()
  async wait() {
    const released = new Promise<void>((r) => (releaseSlow = r));
    slowEntered();
    await released;
    return { slow: true };
  }
}

@Public()
@Controller('hosted/page')
class HostedPageController {
  @Get()
  @IgnoreQueryParameters()
  page() {
    return { page: true };
  }
}

@Public()
@Controller('open')
class OpenController {
  @Post()
  @HttpCode(200)
  touch() {
    touches++;
    return { ok: true };
  }
}

/** Runs of the parameterless POST /open (a route that reads no body, as the webhook secret rotation). */
let touches = 0;

/** When set, key lookups wait until `size` of them are under way, as lookups of a concurrent burst do on a database. */
let lookupGate: { size: number; waiting: number; open: () => void; opened: Promise<void> } | null = null;
function gateLookups(size: number): void {
  let open = (): void => undefined;
  const opened = new Promise<void>((r) => (open = r));
  lookupGate = { size, waiting: 0, open, opened };
}

/** Every key lookup the guard makes (the database round trip a guess costs). */
let lookups = 0;
/** When set, the lookup of this hash waits until the test releases it, and says when it is under way. */
let heldLookup: { hash: string; entered: () => void; released: Promise<void> } | null = null;
function holdLookupOf(hash: string): { entered: Promise<void>; release: () => void } {
  let entered = (): void => undefined;
  let release = (): void => undefined;
  const enteredP = new Promise<void>((r) => (entered = r));
  const released = new Promise<void>((r) => (release = r));
  heldLookup = { hash, entered, released };
  return { entered: enteredP, release };
}

const resolver: ApiKeyResolver = {
  resolve: async (hash) => {
    lookups++;
    if (lookupGate && ++lookupGate.waiting >= lookupGate.size) lookupGate.open();
    await lookupGate?.opened;
    if (heldLookup?.hash === hash) {
      const held = heldLookup;
      heldLookup = null;
      held.entered();
      await held.released;
    }
    return hash === KEY_HASH || hash === OTHER_KEY_HASH
      ? { merchantId: hash === KEY_HASH ? 'mer_h' : 'mer_o', mode: 'test', keyHash: hash }
      : null;
  },
};

/** An authenticated route whose requests wait, past their authentication, until the test releases them. */
let slowAuthenticated: { count: number; reached: number; all: () => void; release: Promise<void> } | null =
  null;
function holdAuthenticated(count: number): { reached: Promise<void>; release: () => void } {
  let all = (): void => undefined;
  let release = (): void => undefined;
  const reached = new Promise<void>((r) => (all = r));
  slowAuthenticated = { count, reached: 0, all, release: new Promise<void>((r) => (release = r)) };
  return { reached, release };
}

@Controller('slow-notes')
class SlowNoteController {
  @Get()
  async wait() {
    const held = slowAuthenticated;
    if (held && ++held.reached >= held.count) held.all();
    await held?.release;
    return { object: 'list', data: [] };
  }
}

async function startApp(options: Partial<HttpAppOptions> = {}): Promise<{
  app: NestFastifyApplication;
  base: string;
  port: number;
}> {
  @Module({
    imports: [HealthModule],
    controllers: [NoteController, OpenController, HostedPageController, SlowController, SlowNoteController],
    providers: [
      { provide: API_KEY_RESOLVER, useValue: resolver },
      { provide: APP_GUARD, useClass: ApiKeyGuard },
    ],
  })
  class TestModule {}
  const app = await createHttpApp(TestModule, { service: 'test', logLevel: 'fatal', ...options });
  app.get(ReadinessRegistry).register('always', async () => undefined);
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return { app, base: `http://127.0.0.1:${port}`, port };
}

/** Serves the test app for the enclosing describe with these rate limits, the others at their defaults. */
function serveWithLimits(
  limits: Partial<RateLimits>,
  options: Partial<HttpAppOptions> = {},
): { base: string } {
  const server: { base: string; app?: NestFastifyApplication } = { base: '' };
  beforeAll(async () => {
    const started = await startApp({ ...options, rateLimits: { ...DEFAULT_RATE_LIMITS, ...limits } });
    server.app = started.app;
    server.base = started.base;
  });
  afterAll(async () => {
    await server.app?.close();
  });
  return server;
}

/** Sends raw bytes on a fresh connection and returns the status line's code and the body. */
function rawRequest(port: number, head: string, body: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.slice(text.indexOf('\r\n\r\n') + 4) });
    });
    socket.write(`${head}\r\nHost: 127.0.0.1\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
    socket.end(body);
  });
}

describe('HTTP hardening (real Fastify server)', () => {
  let app: NestFastifyApplication;
  let base: string;
  let port: number;

  beforeAll(async () => {
    ({ app, base, port } = await startApp());
  });
  afterAll(async () => {
    await app.close();
  });

  const post = (body: string | Buffer, contentType = 'application/json') =>
    fetch(`${base}/notes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': contentType },
      body,
    });

  async function expectRefused(res: Response, status: number, code: string, param?: string): Promise<void> {
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect({ status: res.status, ...body.error }).toMatchObject({
      status,
      // A character one parameter may not hold is that parameter's validation_error; the rest concern the request.
      type: code === 'invalid_string' ? 'validation_error' : 'invalid_request',
      code,
      ...(param ? { param } : {}),
    });
  }

  it('refuses form-encoded and other non-JSON bodies with 415 in the envelope, running nothing', async () => {
    const before = writes;
    await expectRefused(
      await post('text=hello', 'application/x-www-form-urlencoded'),
      415,
      'unsupported_media_type',
    );
    await expectRefused(await post('{"text":"hello"}', 'text/plain'), 415, 'unsupported_media_type');
    await expectRefused(await post('<text>hello</text>', 'application/xml'), 415, 'unsupported_media_type');
    expect(writes).toBe(before);
    // JSON with a charset parameter is JSON.
    expect((await post('{"text":"ok"}', 'application/json; charset=utf-8')).status).toBe(201);
  });

  it('still accepts an empty text/plain body (the hosted pages post an empty form)', async () => {
    const res = await fetch(`${base}/open`, { method: 'POST', headers: { 'content-type': 'text/plain' } });
    expect(res.status).toBe(200);
  });

  it('refuses a NUL character in a string with 400 and the param, writing nothing', async () => {
    const before = writes;
    await expectRefused(await post('{"text":"a\\u0000b"}'), 400, 'invalid_string', 'text');
    await expectRefused(
      await post('{"text":"ok","extra":{"k":["x","\\u0000"]}}'),
      400,
      'invalid_string',
      'extra[k][1]',
    );
    await expectRefused(await post('{"text":"ok","extra":{"a\\u0000":"x"}}'), 400, 'invalid_string', 'extra');
    expect(writes).toBe(before);
  });

  it('refuses a lone surrogate in a string with 400 and the param', async () => {
    await expectRefused(await post('{"text":"\\ud800"}'), 400, 'invalid_string', 'text');
    await expectRefused(await post('{"text":"x\\udc00y"}'), 400, 'invalid_string', 'text');
    // A proper pair (an emoji) is fine.
    expect((await post('{"text":"\\ud83d\\ude00"}')).status).toBe(201);
  });

  it('refuses JSON nested thousands deep with 400, not 500', async () => {
    const deep = '{"text":"x","extra":' + '{"a":'.repeat(5000) + '1' + '}'.repeat(5000) + '}';
    await expectRefused(await post(deep), 400, 'invalid_json');
    const deepArrays = '{"text":"x","extra":{"a":' + '['.repeat(100_000) + ']'.repeat(100_000) + '}}';
    await expectRefused(await post(deepArrays), 400, 'invalid_json');
  });

  it('refuses a key written twice in one object (JSON.parse would keep the last one silently), running nothing', async () => {
    const before = writes;
    const top = await post('{"text":"5000000","text":"1"}');
    await expectRefused(top, 400, 'invalid_json', 'text');
    // Compared decoded: an escaped spelling of the same key is the same key.
    await expectRefused(await post('{"text":"a","te\\u0078t":"b"}'), 400, 'invalid_json', 'text');
    const nested = await post('{"text":"a","extra":{"k":"1", "k" :"2"}}');
    await expectRefused(nested, 400, 'invalid_json');
    expect(writes).toBe(before);
    // The same key in two objects, a key's name as a value, and a key inside a string are no duplicates.
    expect((await post('{"text":"text","extra":{"text":"a","b":{"text":"c"}}}')).status).toBe(201);
    expect((await post('{"text":"{\\"text\\":1,\\"text\\":2}"}')).status).toBe(201);
  });

  it('refuses invalid UTF-8 with 400 instead of replacing bytes', async () => {
    const before = writes;
    const bytes = Buffer.concat([Buffer.from('{"text":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const res = await rawRequest(
      port,
      `POST /notes HTTP/1.1\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json`,
      bytes,
    );
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: { type: 'invalid_request', code: 'invalid_json' } });
    expect(writes).toBe(before);
  });

  it('refuses a JSON body that is not an object (null, an array, a scalar) with 400 on every route, running nothing', async () => {
    const [writesBefore, touchesBefore] = [writes, touches];
    for (const body of ['null', ' null ', '[]', '[{"text":"x"}]', '0', '"text"', 'true', 'false']) {
      await expectRefused(await post(body), 400, 'invalid_json');
      await expectRefused(
        await fetch(`${base}/open`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        }),
        400,
        'invalid_json',
      );
    }
    expect([writes, touches]).toEqual([writesBefore, touchesBefore]);
    // No body at all, or {}, is still "no parameters".
    expect((await fetch(`${base}/open`, { method: 'POST' })).status).toBe(200);
    const empty = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' };
    expect((await fetch(`${base}/open`, empty)).status).toBe(200);
  });

  it('refuses any query parameter on a write with 400 validation_error naming it, running nothing, after authentication', async () => {
    const [writesBefore, touchesBefore] = [writes, touches];
    const onNotes = await fetch(`${base}/notes?text=hidden&x=1`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: '{"text":"shown"}',
    });
    expect(onNotes.status).toBe(400);
    expect(await onNotes.json()).toMatchObject({ error: { type: 'validation_error', param: 'text' } });
    const onOpen = await fetch(`${base}/open?confirm=false`, { method: 'POST' });
    expect(await onOpen.json()).toMatchObject({ error: { type: 'validation_error', param: 'confirm' } });
    expect([writes, touches]).toEqual([writesBefore, touchesBefore]);
    const anonymous = await fetch(`${base}/notes?x=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"text":"shown"}',
    });
    expect(anonymous.status).toBe(401);
    // A read takes the query its route declares; a bare `?` is no parameter.
    const read = await fetch(`${base}/notes?limit=5`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(read.status).toBe(200);
    expect((await fetch(`${base}/open?`, { method: 'POST' })).status).toBe(200);
  });

  it('refuses a query parameter a read does not declare with 400 validation_error naming it, after authentication', async () => {
    const get = (path: string, headers: Record<string, string> = { authorization: `Bearer ${KEY}` }) =>
      fetch(`${base}${path}`, { headers });
    const typo = await get('/notes?limt=5');
    expect(typo.status).toBe(400);
    expect(await typo.json()).toEqual({
      error: {
        type: 'validation_error',
        code: 'unknown_parameter',
        param: 'limt',
        message: 'Received unknown parameter: limt (this request takes limit, starting_after, q).',
      },
    });
    // A read of one resource declares none: any parameter is unknown, the first one named.
    const one = await get('/notes/n1?expand=author&x=1');
    expect(one.status).toBe(400);
    expect(await one.json()).toMatchObject({
      error: {
        param: 'expand',
        message: 'Received unknown parameter: expand (this request takes no query parameters).',
      },
    });
    // Declared ones, repeated or not, are the route's to check.
    expect((await get('/notes?limit=5&starting_after=n1')).status).toBe(200);
    expect((await get('/notes?limit=5&limit=6')).status).toBe(200);
    expect((await get('/notes/n1?')).status).toBe(200);
    expect((await get('/notes?limt=5', {})).status).toBe(401);
    // Pages browsers open from decorated links, and the probes, ignore their query.
    expect((await get('/hosted/page?utm_source=mail&gclid=x', {})).status).toBe(200);
    expect((await get('/health?probe=1', {})).status).toBe(200);
    expect((await get('/ready?_=1700000000', {})).status).toBe(200);
  });

  it('refuses __proto__ keys (prototype poisoning) with 400', async () => {
    await expectRefused(await post('{"text":"x","extra":{"__proto__":{"admin":true}}}'), 400, 'invalid_json');
  });

  const getNotes = (path: string) =>
    fetch(`${base}/notes${path}`, { headers: { authorization: `Bearer ${KEY}` } });

  it('refuses a NUL, a control character or a lone surrogate in a path or query parameter, naming it', async () => {
    for (const bad of ['%00', '%09', '%0A', '%7F', '%ED%A0%80', '%ed%bf%bf', 'x%00y']) {
      await expectRefused(await getNotes(`/n1/lines/${bad}`), 400, 'invalid_string', 'line');
      await expectRefused(await getNotes(`/${bad}/lines/2`), 400, 'invalid_string', 'noteId');
      await expectRefused(
        await getNotes(`?limit=2&starting_after=${bad}`),
        400,
        'invalid_string',
        'starting_after',
      );
      await expectRefused(await getNotes(`/n1/lines/2?q=${bad}`), 400, 'invalid_string', 'q');
    }
    // In a parameter's name, and on a route that does not exist: still the envelope.
    await expectRefused(await getNotes(`?a%00b=1`), 400, 'invalid_string');
    await expectRefused(await fetch(`${base}/nowhere/%00`), 400, 'invalid_string', 'path');
    // Well-formed text is left alone: a surrogate pair is a character like any other.
    expect(await (await getNotes(`/%F0%9F%98%80/lines/%E2%82%AC?q=%20`)).json()).toEqual({
      object: 'line',
      noteId: '\u{1F600}',
      line: '\u20AC',
    });
  });

  it('answers a path that does not decode as UTF-8 in the envelope', async () => {
    const res = await getNotes('/%C0%80/lines/1');
    await expectRefused(res, 400, 'invalid_url');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('refuses a query parameter whose percent-encoding does not decode, naming it, as it does a path', async () => {
    for (const bad of ['%ZZ', '%E0%A4', '%C0%80', '%FF', 'abc%', '%2', '%80']) {
      await expectRefused(await getNotes(`?limit=${bad}`), 400, 'invalid_url', 'limit');
      await expectRefused(
        await getNotes(`?limit=2&starting_after=${bad}`),
        400,
        'invalid_url',
        'starting_after',
      );
    }
    // In a parameter's name, and after a well-formed parameter holding escapes.
    await expectRefused(await getNotes(`?q=%20&a%ZZb=1`), 400, 'invalid_url', 'a%ZZb');
    // Well-formed escapes, a `+` and multi-byte characters are left alone.
    expect((await getNotes(`?q=a+b%20%E2%82%AC%F0%9F%98%80&limit=%31`)).status).toBe(200);
  });

  it('marks API responses no-store and nosniff, errors included', async () => {
    for (const res of [
      await fetch(`${base}/notes`, { headers: { authorization: `Bearer ${KEY}` } }),
      await fetch(`${base}/notes`),
      await fetch(`${base}/health`),
    ]) {
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });
});

describe('HTTP timeouts (slow clients are cut)', () => {
  let app: NestFastifyApplication;
  let port: number;

  beforeAll(async () => {
    ({ app, port } = await startApp({
      timeouts: { requestMs: 1500, headersMs: 1000, keepAliveMs: 500, idleMs: 2000 },
    }));
  });
  afterAll(async () => {
    await app.close();
  });

  /** Opens a connection that trickles `parts` one every 200 ms forever; resolves when the server closes it. */
  function trickle(first: string, next: string): Promise<{ received: string; sent: number }> {
    return new Promise((resolve) => {
      const socket: Socket = connect(port, '127.0.0.1');
      let received = '';
      let sent = 0;
      socket.on('data', (c: Buffer) => (received += c.toString('utf8')));
      socket.on('error', () => undefined);
      socket.write(first);
      const timer = setInterval(() => {
        if (!socket.writable) return;
        socket.write(next);
        sent++;
      }, 200);
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ received, sent });
      });
    });
  }

  it('cuts a client that sends its headers a byte at a time (slowloris)', async () => {
    const result = await trickle('GET /health HTTP/1.1\r\nHost: x\r\n', 'X-a: b\r\n');
    // It was cut: the server closed the connection while the client still had more to send.
    expect(result.received === '' || /^HTTP\/1\.1 408/.test(result.received)).toBe(true);
  }, 20_000);

  it('cuts a client that sends its body a byte at a time', async () => {
    const result = await trickle(
      `POST /notes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"text":"`,
      'a',
    );
    expect(result.received === '' || /^HTTP\/1\.1 408/.test(result.received)).toBe(true);
  }, 20_000);

  it('closes an idle keep-alive connection', async () => {
    const closed = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      socket.on('data', (c: Buffer) => (received += c.toString('utf8')));
      socket.on('close', () => resolve(received));
      socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    expect(closed).toMatch(/^HTTP\/1\.1 200/);
  }, 20_000);
});

describe('rate limits (429 in the envelope with Retry-After)', () => {
  const server = serveWithLimits({ perKeyPerSecond: 20, perSourcePerSecond: 60, authFailuresPerMinute: 5 });

  const get = (key: string) => fetch(`${server.base}/notes`, { headers: { authorization: `Bearer ${key}` } });

  it('limits one key, and another key is unaffected', async () => {
    const statuses = (await Promise.all(Array.from({ length: 30 }, () => get(KEY)))).map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(20);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(10);
    const limited = await get(KEY);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await limited.json()).toMatchObject({
      error: { type: 'rate_limited', code: 'rate_limited', message: expect.stringMatching(/too many/i) },
    });
    expect((await get(OTHER_KEY)).status).toBe(200);
  });

  it('limits failed authentication far more tightly, yet still serves a valid key and the hosted pages', async () => {
    const bad = 'sk_test_' + 'z'.repeat(32);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await get(bad)).status);
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.slice(5)).toEqual([429, 429, 429]);
    const res = await get(bad);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await res.json()).toMatchObject({ error: { type: 'rate_limited', code: 'rate_limited' } });
    // No key at all is no better than a wrong one.
    expect((await fetch(`${server.base}/notes`)).status).toBe(429);
    // One guesser behind a shared address (a NAT, or a proxy TRUST_PROXY does not name) locks no merchant out.
    expect((await get(OTHER_KEY)).status).toBe(200);
    expect((await fetch(`${server.base}/hosted/page`)).status).toBe(200);
    const metrics = await register.getSingleMetric('stablepay_http_rate_limited_total')?.get();
    expect(metrics?.values).toContainEqual(
      expect.objectContaining({ labels: { limit: 'auth_failures' }, value: expect.any(Number) }),
    );
    expect(metrics?.values).toContainEqual(expect.objectContaining({ labels: { limit: 'key' } }));
  });

  it('never limits the health and readiness probes', async () => {
    const statuses = (
      await Promise.all(Array.from({ length: 80 }, () => fetch(`${server.base}/health`)))
    ).map((r) => r.status);
    expect(new Set(statuses)).toEqual(new Set([200]));
  });
});

describe('per-key rate limit on either credential header', () => {
  // The per-key budget alone (one request a second), so only it can answer 429 here.
  const server = serveWithLimits({ perKeyPerSecond: 1, perSourcePerSecond: 0, authFailuresPerMinute: 0 });

  it('limits a key presented as x-api-key (the payment-request surface), not only as a Bearer key', async () => {
    // Twenty at once on a budget of one a second: refused ones whatever the machine's speed.
    const responses = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`${server.base}/open`, { method: 'POST', headers: { 'x-api-key': KEY } }),
      ),
    );
    const limited = responses.find((r) => r.status === 429);
    expect(limited).toBeDefined();
    expect(limited?.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await limited?.json()).toMatchObject({
      error: { type: 'rate_limited', message: expect.stringMatching(/this API key/) },
    });
    expect(
      (await fetch(`${server.base}/open`, { method: 'POST', headers: { 'x-api-key': OTHER_KEY } })).status,
    ).toBe(200);
  });

  it('spends one budget per key whichever header carries it, and every key a request carries', () => {
    const budgets = (headers: Record<string, string>) => presentedKeyBudgets({ headers });
    const [bearer] = budgets({ authorization: `Bearer ${KEY}` });
    expect(budgets({ 'x-api-key': ` ${KEY} ` })).toEqual([bearer]);
    expect(budgets({ authorization: `Bearer ${KEY}`, 'x-api-key': KEY })).toEqual([bearer]);
    expect(budgets({ authorization: `Bearer ${KEY}`, 'x-api-key': OTHER_KEY })).toHaveLength(2);
    expect(budgets({ authorization: 'Basic abc', 'x-api-key': '' })).toEqual([]);
    expect(bearer).not.toContain(KEY);
  });
});

/** GET /notes with these headers as sent, a repeated one included (`requestWithRawHeaders`). */
async function getNotesWithHeaders(base: string, headers: string[]) {
  const { status, body } = await requestWithRawHeaders(`${base}/notes`, 'GET', headers);
  return { status, error: body['error'] };
}

describe('ambiguous credentials (a repeated credential header, or two headers naming different keys)', () => {
  const server = serveWithLimits({});
  const get = (...headers: string[]) => getNotesWithHeaders(server.base, headers);
  const refused = (message: RegExp) => ({
    status: 401,
    error: expect.objectContaining({
      type: 'authentication_error',
      code: 'invalid_api_key',
      message: expect.stringMatching(message),
    }),
  });

  it('refuses a repeated Authorization header with 401, even naming one valid key twice, looking no key up', async () => {
    const before = lookups;
    const twice = refused(/more than one Authorization header/);
    expect(await get('Authorization', `Bearer ${KEY}`, 'Authorization', `Bearer ${KEY}`)).toEqual(twice);
    expect(await get('Authorization', `Bearer ${KEY}`, 'authorization', `Bearer ${OTHER_KEY}`)).toEqual(
      twice,
    );
    expect(await get('Authorization', 'Bearer sk_test_nokey', 'Authorization', `Bearer ${KEY}`)).toEqual(
      twice,
    );
    expect(lookups).toBe(before);
  });

  it('refuses Authorization and x-api-key naming different keys, or x-api-key sent twice; one key in both is served', async () => {
    const before = lookups;
    expect(await get('Authorization', `Bearer ${KEY}`, 'X-API-Key', OTHER_KEY)).toEqual(
      refused(/Authorization and x-api-key headers carry different credentials/),
    );
    expect(await get('Authorization', `Bearer ${KEY}`, 'x-api-key', KEY, 'X-Api-Key', KEY)).toEqual(
      refused(/more than one x-api-key header/),
    );
    expect(lookups).toBe(before);
    expect((await get('Authorization', `Bearer ${KEY}`, 'x-api-key', ` ${KEY}`)).status).toBe(200);
  });
});

describe('ambiguous credentials and the failed-authentication budget', () => {
  const server = serveWithLimits({ perKeyPerSecond: 0, perSourcePerSecond: 0, authFailuresPerMinute: 3 });
  const get = (...headers: string[]) => getNotesWithHeaders(server.base, headers);

  it('counts each refusal as a failed authentication: past the budget 429, yet a key in use is still served', async () => {
    expect((await get('Authorization', `Bearer ${KEY}`)).status).toBe(200);
    const statuses: number[] = [];
    for (const guess of ['a', 'b', 'c', 'd'].map((c) => `sk_test_${c.repeat(32)}`))
      statuses.push((await get('Authorization', `Bearer ${KEY}`, 'Authorization', `Bearer ${guess}`)).status);
    expect(statuses).toEqual([401, 401, 401, 429]);
    expect((await get('Authorization', `Bearer ${KEY}`, 'x-api-key', OTHER_KEY)).status).toBe(429);
    expect((await get('Authorization', `Bearer ${KEY}`)).status).toBe(200);
  });
});

describe('failed-authentication budget under a concurrent burst', () => {
  const server = serveWithLimits({ perKeyPerSecond: 0, perSourcePerSecond: 0, authFailuresPerMinute: 5 });

  const validBurst = async (): Promise<Set<number>> =>
    new Set(
      (
        await Promise.all(
          Array.from({ length: 64 }, () =>
            fetch(`${server.base}/notes`, { headers: { authorization: `Bearer ${KEY}` } }),
          ),
        )
      ).map((r) => r.status),
    );

  it('holds none of the failure budget for a 64-client burst on one valid key', async () => {
    expect(await validBurst()).toEqual(new Set([200]));
  });

  it('answers no more 401s than the budget to guesses sent all at once', async () => {
    // Every guess is at the key lookup before the first is answered.
    gateLookups(20);
    const statuses = (
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          fetch(`${server.base}/notes`, {
            headers: { authorization: `Bearer sk_test_${String(i).padStart(32, 'g')}` },
          }),
        ),
      )
    ).map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    lookupGate = null;
  });

  it('still serves a 64-client burst on one valid key from the locked-out address', async () => {
    expect(await validBurst()).toEqual(new Set([200]));
  });
});

describe('failed-authentication lockout answers before the key lookup', () => {
  const server = serveWithLimits(
    { perKeyPerSecond: 0, perSourcePerSecond: 0, authFailuresPerMinute: 3 },
    { trustProxy: ['127.0.0.1'] },
  );

  const as = (client: string, key: string) =>
    fetch(`${server.base}/notes`, { headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': client } });

  it('refuses a locked-out source presenting a key that has not authenticated recently with 429, without looking it up', async () => {
    // KEY is in use by its merchant, from elsewhere.
    expect((await as('203.0.113.7', KEY)).status).toBe(200);
    const guesser = '198.51.100.9';
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++)
      statuses.push((await as(guesser, `sk_test_${String(i).padStart(32, 'w')}`)).status);
    expect(statuses).toEqual([401, 401, 401, 429]);

    // The right key for another merchant, guessed by the locked-out source: no lookup, so no oracle.
    const before = lookups;
    const guessed = await as(guesser, OTHER_KEY);
    expect(guessed.status).toBe(429);
    expect(Number(guessed.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await guessed.json()).toMatchObject({ error: { type: 'rate_limited', code: 'rate_limited' } });
    expect(lookups).toBe(before);

    // A key that authenticated recently is served from the locked-out address (a shared NAT locks no merchant
    // out), and the same key from an address that is not locked out is served too.
    expect((await as(guesser, KEY)).status).toBe(200);
    expect((await as('192.0.2.44', OTHER_KEY)).status).toBe(200);
  });
});

describe('requests awaiting authentication, bounded per source', () => {
  const server = serveWithLimits({
    perKeyPerSecond: 0,
    perSourcePerSecond: 0,
    authFailuresPerMinute: 100,
    unauthenticatedInFlightPerSource: 4,
  });

  it('looks up no more keys at once from one source than its bound; the rest get 429 at once', async () => {
    const before = lookups;
    // The admitted lookups wait until the six others have been answered (or, if the bound does not hold, until a
    // fifth lookup is under way), so all ten are in flight together.
    gateLookups(5);
    const gate = lookupGate;
    let answered = 0;
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        fetch(`${server.base}/notes`, {
          headers: { authorization: `Bearer sk_test_${String(i).padStart(32, 'f')}` },
        }).then((r) => {
          if (++answered === 6) gate?.open();
          return r;
        }),
      ),
    );
    lookupGate = null;
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(4);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
    expect(lookups - before).toBe(4);
    const refused = responses.find((r) => r.status === 429);
    expect(refused?.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await refused?.json()).toMatchObject({ error: { type: 'rate_limited', code: 'rate_limited' } });
  });

  it('does not count a key that authenticated recently against the bound', async () => {
    expect(
      (await fetch(`${server.base}/notes`, { headers: { authorization: `Bearer ${KEY}` } })).status,
    ).toBe(200);
    gateLookups(16);
    const statuses = await Promise.all(
      Array.from({ length: 16 }, () =>
        fetch(`${server.base}/notes`, { headers: { authorization: `Bearer ${KEY}` } }).then((r) => r.status),
      ),
    );
    lookupGate = null;
    expect(new Set(statuses)).toEqual(new Set([200]));
  });
});

describe('failed-authentication budget across a window boundary', () => {
  const realNow = Date.now.bind(Date);
  let offset = 0;
  // Before the app starts, so that its clock is the one the test moves.
  beforeAll(() => {
    jest.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
  });
  afterAll(() => {
    jest.restoreAllMocks();
  });
  const server = serveWithLimits({ perKeyPerSecond: 0, perSourcePerSecond: 0, authFailuresPerMinute: 2 });

  const get = (key: string) =>
    fetch(`${server.base}/notes`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);

  it('never lets a request that began in one window give a failure back to the next', async () => {
    // A valid request is at its key lookup when the minute ends.
    const held = holdLookupOf(OTHER_KEY_HASH);
    const valid = get(OTHER_KEY);
    await held.entered;
    offset += 61_000;
    const bad = `sk_test_${'b'.repeat(32)}`;
    expect([await get(bad), await get(bad)]).toEqual([401, 401]);
    held.release();
    expect(await valid).toBe(200);
    // The new window's budget is spent: the valid request's answer returned nothing to it.
    expect(await get(bad)).toBe(429);
  });
});

describe('valid requests in flight', () => {
  const server = serveWithLimits({ perKeyPerSecond: 0, perSourcePerSecond: 0, authFailuresPerMinute: 2 });

  it('hold none of the failure budget while they run, so a guess is counted against the budget alone', async () => {
    const held = holdAuthenticated(5);
    const valid = Array.from({ length: 5 }, () =>
      fetch(`${server.base}/slow-notes`, { headers: { authorization: `Bearer ${KEY}` } }).then(
        (r) => r.status,
      ),
    );
    await held.reached;
    const bad = () =>
      fetch(`${server.base}/notes`, { headers: { authorization: `Bearer sk_test_${'v'.repeat(32)}` } }).then(
        (r) => r.status,
      );
    try {
      expect([await bad(), await bad(), await bad()]).toEqual([401, 401, 429]);
    } finally {
      held.release();
      slowAuthenticated = null;
    }
    expect(await Promise.all(valid)).toEqual([200, 200, 200, 200, 200]);
  });
});

describe('the API key hash', () => {
  const server = serveWithLimits({
    perKeyPerSecond: 1000,
    perSourcePerSecond: 1000,
    authFailuresPerMinute: 30,
  });
  afterAll(() => {
    jest.restoreAllMocks();
  });

  it('is computed once per request, shared by the rate limits and the guard', async () => {
    // The real module object, the one the code under test calls through.
    const crypto = jest.requireActual<typeof nodeCrypto>('node:crypto');
    const spy = jest.spyOn(crypto, 'createHash');
    const res = await fetch(`${server.base}/notes`, { headers: { authorization: `Bearer ${KEY}` } });
    const sha256 = spy.mock.calls.filter(([algorithm]) => algorithm === 'sha256').length;
    spy.mockRestore();
    expect(res.status).toBe(200);
    expect(sha256).toBe(1);
  });
});

describe('rate limits behind a trusted proxy (TRUST_PROXY)', () => {
  const server = serveWithLimits(
    { perKeyPerSecond: 0, perSourcePerSecond: 0, authFailuresPerMinute: 2 },
    { trustProxy: ['127.0.0.1'] },
  );

  const bad = (client: string) =>
    fetch(`${server.base}/notes`, {
      headers: { authorization: `Bearer sk_test_${'q'.repeat(32)}`, 'x-forwarded-for': client },
    }).then((r) => r.status);

  it('counts failed authentication per client named by the trusted proxy, not per proxy', async () => {
    expect([await bad('203.0.113.1'), await bad('203.0.113.1'), await bad('203.0.113.1')]).toEqual([
      401, 401, 429,
    ]);
    // Another client behind the same proxy still has its own budget.
    expect(await bad('198.51.100.2')).toBe(401);
  });

  it('counts an IPv6 client by its /64: rotating addresses within it gets no fresh budget', async () => {
    expect([await bad('2001:db8:5:6::1'), await bad('2001:db8:5:6:ffff::2')]).toEqual([401, 401]);
    expect(await bad('2001:db8:5:6:1:2:3:4')).toBe(429);
    expect(await bad('2001:db8:5:7::1')).toBe(401);
  });

  it('keys a source by its IPv4 address or its IPv6 /64', () => {
    expect(sourceBudget('203.0.113.9')).toBe('203.0.113.9');
    expect(sourceBudget('::ffff:203.0.113.9')).toBe('203.0.113.9');
    expect(sourceBudget('2001:db8:0:1::1')).toBe('2001:db8:0:1::/64');
    expect(sourceBudget('2001:0db8:0000:0001:abcd::')).toBe('2001:db8:0:1::/64');
    expect(sourceBudget('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(sourceBudget('::1')).toBe('0:0:0:0::/64');
    expect(sourceBudget('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });
});

describe('graceful stop (drainHttpApp)', () => {
  it('is not ready but still serves during the shutdown delay, then finishes what is in flight and answers new requests on open connections with the 503 envelope', async () => {
    const { app, base, port } = await startApp();
    let endDelay: () => void = () => undefined;
    const draining = drainHttpApp(app, new Promise<void>((r) => (endDelay = r)));

    const ready = await fetch(`${base}/ready`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ status: 'not_ready', checks: { shutdown: 'stopping' } });
    expect((await fetch(`${base}/notes`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);

    // A keep-alive connection whose request is in its handler when the listener closes, and the client's next
    // request on it once the answer came.
    const entered = new Promise<void>((r) => (slowEntered = r));
    const socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let answered: () => void = () => undefined;
    const firstAnswer = new Promise<void>((r) => (answered = r));
    socket.on('data', (c: Buffer) => {
      received.push(c);
      if (Buffer.concat(received).includes('{"slow":true}')) answered();
    });
    const socketClosed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
    await entered;
    endDelay();
    // The listener closes once the delay is over.
    while (app.getHttpServer().listening) await new Promise((r) => setTimeout(r, 10));
    releaseSlow();
    await firstAnswer;
    socket.write(`GET /notes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n\r\n`);
    await socketClosed;
    await draining;

    const text = Buffer.concat(received).toString('utf8');
    const [first, second] = text.split(/(?=HTTP\/1\.1 )/);
    expect(first).toMatch(/^HTTP\/1\.1 200/);
    expect(first).toContain('{"slow":true}');
    expect(second).toMatch(/^HTTP\/1\.1 503/);
    const head = (second ?? '').toLowerCase();
    for (const header of [
      'retry-after: 1',
      'connection: close',
      'cache-control: no-store',
      'x-content-type-options: nosniff',
      'content-type: application/json; charset=utf-8',
    ])
      expect(head).toContain(header);
    expect(JSON.parse((second ?? '').slice((second ?? '').indexOf('\r\n\r\n') + 4))).toEqual({
      error: {
        type: 'api_error',
        code: 'service_unavailable',
        message: expect.stringMatching(/shutting down/),
      },
    });
    await app.close();
  });
});
