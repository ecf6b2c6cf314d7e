import { Body, Controller, HttpCode, Module, Post } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { connect } from 'node:net';
import { register } from 'prom-client';
import { createHttpApp } from './http-app';
import { metricValue } from '@stablepay/testing';

let writes = 0;

@Controller('notes')
class NoteController {
  @Post()
  @HttpCode(201)
  create(@Body() body: unknown) {
    writes++;
    return { object: 'note', body };
  }
}

@Module({ controllers: [NoteController] })
class NotesModule {}

/** Sends `first`, then `next` every 100 ms while the socket is open; resolves with what came back once closed. */
function exchange(port: number, first: string | Buffer, next?: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (c: Buffer) => (received += c.toString('utf8')));
    socket.on('error', () => undefined);
    socket.write(first);
    const timer =
      next === undefined ? undefined : setInterval(() => socket.writable && socket.write(next), 100);
    socket.on('close', () => {
      clearInterval(timer);
      resolve(received);
    });
  });
}

function parse(raw: string): { status: number; headers: string; body: unknown } {
  const [head = '', body = ''] = raw.split('\r\n\r\n');
  return { status: Number(head.split(' ')[1]), headers: head.toLowerCase(), body: JSON.parse(body) };
}

describe('errors before any route ran (timeouts, oversized headers, not HTTP) are answered in the envelope and counted in the request metrics', () => {
  let app: NestFastifyApplication;
  let port: number;
  /** Node's own answers of this status in the request counter (the registry /metrics serves). */
  const nodeAnswers = async (status: number): Promise<number> =>
    metricValue(await register.metrics(), 'stablepay_http_requests_total', {
      method: 'unknown',
      route: 'node_http',
      status: String(status),
      status_class: '4xx',
    });
  /** Runs `exchange` and checks it added exactly one answer of `status` to the request counter. */
  const counted = async (status: number, exchange: () => Promise<string>): Promise<string> => {
    const before = await nodeAnswers(status);
    const raw = await exchange();
    expect(await nodeAnswers(status)).toBe(before + 1);
    return raw;
  };

  beforeAll(async () => {
    app = await createHttpApp(NotesModule, {
      service: 'client-errors-test',
      logLevel: 'error',
      timeouts: { requestMs: 1000, headersMs: 800, keepAliveMs: 500, idleMs: 3000 },
    });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as { port: number }).port;
  });
  afterAll(async () => {
    await app.close();
  });

  it('a body that trickles past the request timeout: 408 request_timeout, nothing written', async () => {
    const raw = await counted(408, () =>
      exchange(
        port,
        'POST /notes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"text":"',
        'a',
      ),
    );
    const answer = parse(raw);
    expect(answer.status).toBe(408);
    expect(answer.body).toEqual({
      error: { type: 'invalid_request', code: 'request_timeout', message: expect.any(String) },
    });
    expect(answer.headers).toContain('cache-control: no-store');
    expect(answer.headers).toContain('x-content-type-options: nosniff');
    expect(answer.headers).toContain('connection: close');
    expect(writes).toBe(0);
  }, 20_000);

  it('headers sent a line at a time past the deadline (slowloris): 408 in the envelope', async () => {
    const answer = parse(
      await counted(408, () => exchange(port, 'GET /notes HTTP/1.1\r\nHost: x\r\n', 'X-a: b\r\n')),
    );
    expect(answer.status).toBe(408);
    expect(answer.body).toMatchObject({ error: { type: 'invalid_request', code: 'request_timeout' } });
  }, 20_000);

  it('headers larger than Node accepts: 431 headers_too_large', async () => {
    const answer = parse(
      await counted(431, () =>
        exchange(port, `GET /notes HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(64 * 1024)}\r\n\r\n`),
      ),
    );
    expect(answer.status).toBe(431);
    expect(answer.body).toMatchObject({ error: { type: 'invalid_request', code: 'headers_too_large' } });
  });

  it('bytes that are not HTTP: 400 malformed_request', async () => {
    const answer = parse(await counted(400, () => exchange(port, 'HELLO THERE\r\n\r\n')));
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ error: { type: 'invalid_request', code: 'malformed_request' } });
  });
});
