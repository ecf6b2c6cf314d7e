import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { JsonLogger, type LogLevel } from '@stablepay/util';
import { ErrorEnvelopeFilter } from './error-envelope.filter';
import { createValidationPipe } from './validation';

export interface HttpAppOptions {
  /** Service name in every log line. */
  readonly service: string;
  readonly logLevel?: LogLevel;
  /** Request body limit in bytes (default 1 MiB): larger bodies get 413 in the envelope. */
  readonly bodyLimit?: number;
}

/**
 * Every service's HTTP server: Fastify, JSON logs, the error envelope for every error (including Fastify's
 * own: malformed JSON, oversized bodies, unknown routes) and the validation pipe. Signals are the caller's:
 * `runMain` (apps) and the embedded launcher close the app on SIGTERM, which runs every shutdown hook.
 */
export async function createHttpApp(
  module: unknown,
  options: HttpAppOptions,
): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    return503OnClosing: true,
  });
  const app = await NestFactory.create<NestFastifyApplication>(module as never, adapter, {
    logger: new JsonLogger(options.service, options.logLevel ?? 'log'),
    abortOnError: false,
  });
  app.useGlobalFilters(new ErrorEnvelopeFilter());
  app.useGlobalPipes(createValidationPipe());
  return app;
}
