import { Body, Controller, Get, HttpCode, Module, Patch, Post } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { IsOptional, IsString } from 'class-validator';
import { connect } from 'node:net';
import { register } from 'prom-client';
import { gzipSync } from 'node:zlib';
import { createHttpApp } from './http-app';
import { metricValue } from '@stablepay/testing';
import { requireNoParameters } from './validation';

class NoteDto {
  @IsString()
  text!: string;
}

class ProfileDto {
  @IsOptional()
  @IsString()
  display_name?: string;
}

let notes = 0;
let rotations = 0;
let profile: Record<string, unknown> = {};

@Controller()
class EdgeController {
  @Get('health')
  health() {
    return { status: 'ok' };
  }

  @Post('notes')
  @HttpCode(201)
  create(@Body() body: NoteDto) {
    notes++;
    return { object: 'note', text: body.text };
  }

  /** A route that takes no parameters (the shape of cancel, rotate, recover, redeliver). */
  @Post('rotate')
  @HttpCode(200)
  rotate(@Body() body: unknown) {
    requireNoParameters(body);
    rotations++;
    return { object: 'rotation', n: rotations };
  }

  @Patch('profile')
  update(@Body() body: ProfileDto) {
    profile = { ...profile, ...body };
    return { object: 'profile', ...profile };
  }
}

@Module({ controllers: [EdgeController] })
class EdgeModule {}

/** Writes `request` on a new connection and resolves with every byte answered once the server closes it. */
function exchange(port: number, request: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.write(request);
  });
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

function parse(raw: string): Answer {
  const split = raw.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = raw.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const text = raw.slice(split + 4);
  return { status: Number(statusLine.split(' ')[1]), headers, body: text ? JSON.parse(text) : undefined };
}

/** A request with exactly the head lines given (Host included or not) and `Connection: close`. */
function rawRequest(head: string, lines: readonly string[], body: Buffer | string = ''): Buffer {
  const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const all = [...lines, 'Connection: close'];
  if (payload.length > 0 || /^(POST|PATCH|PUT)/.test(head)) all.push(`Content-Length: ${payload.length}`);
  return Buffer.concat([Buffer.from(`${head}\r\n${all.join('\r\n')}\r\n\r\n`, 'latin1'), payload]);
}

function expectEnvelope(answer: Answer, status: number, code: string, param?: string): void {
  expect(answer.status).toBe(status);
  expect(answer.body).toEqual({
    error: { type: 'invalid_request', code, message: expect.any(String), ...(param ? { param } : {}) },
  });
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(answer.headers['cache-control']).toBe('no-store');
  expect(answer.headers['x-content-type-options']).toBe('nosniff');
}

describe('the HTTP edge answers what Node and Fastify let through (real server, raw requests)', () => {
  let app: NestFastifyApplication;
  let port: number;
  const send = async (head: string, lines: readonly string[], body?: Buffer | string) =>
    parse(await exchange(port, rawRequest(head, lines, body)));
  /** POST /notes with these head lines: refused in the envelope, and no note written. */
  const expectNoteRefused = async (lines: readonly string[], status: number, code: string, param: string) => {
    const before = notes;
    const answer = await send(
      'POST /notes HTTP/1.1',
      [...lines, 'Content-Type: application/json'],
      '{"text":"hi"}',
    );
    expectEnvelope(answer, status, code, param);
    expect(notes).toBe(before);
  };

  beforeAll(async () => {
    app = await createHttpApp(EdgeModule, { service: 'request-headers-test', logLevel: 'fatal' });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as { port: number }).port;
  });
  afterAll(async () => {
    await app.close();
  });

  describe('Host', () => {
    it('an HTTP/1.1 request without Host: 400 malformed_request naming Host, in the envelope with the API headers', async () => {
      const answer = await send('GET /health HTTP/1.1', []);
      expectEnvelope(answer, 400, 'malformed_request', 'Host');
    });

    it('two Host headers: 400 malformed_request naming Host, and the write is not run', async () => {
      await expectNoteRefused(['Host: a.example', 'Host: b.example'], 400, 'malformed_request', 'Host');
    });

    it('one Host, and an HTTP/1.0 request without one (HTTP/1.0 has no Host rule), are served', async () => {
      expect((await send('GET /health HTTP/1.1', ['Host: x'])).status).toBe(200);
      expect((await send('GET /health HTTP/1.0', [])).status).toBe(200);
    });
  });

  describe('Expect', () => {
    it('an Expect other than 100-continue: 417 expectation_failed naming Expect, in the envelope, nothing run, counted in the request metrics', async () => {
      const answered = async (): Promise<number> =>
        metricValue(await register.metrics(), 'stablepay_http_requests_total', {
          method: 'POST',
          route: 'node_http',
          status: '417',
          status_class: '4xx',
        });
      const before = await answered();
      await expectNoteRefused(['Host: x', 'Expect: foo'], 417, 'expectation_failed', 'Expect');
      expect(await answered()).toBe(before + 1);
    });
  });

  describe('Content-Encoding', () => {
    it.each([
      ['br on a plain JSON body', 'br', Buffer.from('{"display_name":"Brotli"}')],
      ['gzip on a real gzip body', 'gzip', gzipSync('{"display_name":"Gzip"}')],
      ['identity then gzip (two codings)', 'identity, gzip', gzipSync('{"display_name":"Both"}')],
    ])('%s: 415 unsupported_content_encoding, nothing written', async (_, coding, body) => {
      profile = {};
      const answer = await send(
        'PATCH /profile HTTP/1.1',
        ['Host: x', `Content-Encoding: ${coding}`, 'Content-Type: application/json'],
        body,
      );
      expectEnvelope(answer, 415, 'unsupported_content_encoding', 'Content-Encoding');
      expect(profile).toEqual({});
    });

    it('identity is no coding: the body is applied', async () => {
      const answer = await send(
        'PATCH /profile HTTP/1.1',
        ['Host: x', 'Content-Encoding: Identity', 'Content-Type: application/json'],
        '{"display_name":"Plain"}',
      );
      expect(answer.status).toBe(200);
      expect(profile).toEqual({ display_name: 'Plain' });
    });
  });

  describe('charset', () => {
    it.each([
      ['utf-16', 'application/json; charset=utf-16', Buffer.from('{"display_name":"Wide"}', 'utf16le')],
      ['latin1', 'application/json; charset=latin1', Buffer.from('{"display_name":"Caf\u00e9"}', 'latin1')],
      ['quoted ISO-8859-1', 'application/json;charset="ISO-8859-1"', Buffer.from('{"display_name":"x"}')],
    ])('%s: 415 unsupported_charset naming Content-Type, nothing written', async (_, type, body) => {
      profile = {};
      const answer = await send('PATCH /profile HTTP/1.1', ['Host: x', `Content-Type: ${type}`], body);
      expectEnvelope(answer, 415, 'unsupported_charset', 'Content-Type');
      expect(profile).toEqual({});
    });

    it.each([
      'application/json; charset=utf-8',
      'application/json; charset="UTF-8"',
      'application/json;charset=UTF8',
    ])('%s is UTF-8: applied', async (type) => {
      const answer = await send(
        'PATCH /profile HTTP/1.1',
        ['Host: x', `Content-Type: ${type}`],
        '{"display_name":"Caf\u00e9"}',
      );
      expect(answer.status).toBe(200);
      expect(profile).toEqual({ display_name: 'Caf\u00e9' });
    });
  });

  describe('an empty body under Content-Type: application/json', () => {
    it('is no body on a route that takes no parameters: accepted, as without a content type', async () => {
      const before = rotations;
      const answer = await send('POST /rotate HTTP/1.1', ['Host: x', 'Content-Type: application/json']);
      expect(answer.status).toBe(200);
      expect(rotations).toBe(before + 1);
      // As `curl -X POST -H 'Content-Type: application/json'` sends it: no Content-Length at all.
      const curl =
        'POST /rotate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n';
      expect(parse(await exchange(port, curl)).status).toBe(200);
      expect(rotations).toBe(before + 2);
    });

    it('is refused where a parameter is required, as no body is: 400 validation_error naming the parameter', async () => {
      const before = notes;
      const answer = await send('POST /notes HTTP/1.1', ['Host: x', 'Content-Type: application/json']);
      expect(answer.status).toBe(400);
      expect(answer.body).toEqual({
        error: {
          type: 'validation_error',
          param: 'text',
          code: 'parameter_missing',
          message: 'text must be a string',
        },
      });
      expect(notes).toBe(before);
    });

    it('a body of white space only is still 400 invalid_json', async () => {
      const answer = await send(
        'POST /rotate HTTP/1.1',
        ['Host: x', 'Content-Type: application/json'],
        '  \r\n ',
      );
      expectEnvelope(answer, 400, 'invalid_json');
    });
  });
});
