import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { DomainError, type DomainErrorShape, type ErrorType } from '@stablepay/util';

export interface ErrorEnvelope {
  error: { type: ErrorType; message: string; param?: string; code?: string };
}

const TYPE_BY_STATUS: Record<number, ErrorType> = {
  400: 'invalid_request',
  401: 'authentication_error',
  403: 'invalid_request',
  404: 'invalid_request',
  405: 'invalid_request',
  409: 'conflict',
  413: 'invalid_request',
  415: 'invalid_request',
  422: 'cannot_process',
  429: 'rate_limited',
};

const CODE_BY_FASTIFY: Record<string, { status: number; code: string; message: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: {
    status: 400,
    code: 'invalid_json',
    message: 'The request body is not valid JSON.',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    status: 400,
    code: 'invalid_json',
    message: 'The request body is empty but its content type is JSON.',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: {
    status: 413,
    code: 'request_too_large',
    message: 'The request body is too large.',
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: 'unsupported_media_type',
    message: 'Send the request body as application/json.',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    status: 400,
    code: 'invalid_content_length',
    message: 'The Content-Length header does not match the body.',
  },
};

/**
 * PostgreSQL refusals that can only come from what the client sent: a safety net behind the checks at the edge
 * (body strings, URL parameters), so a value that slips past them is the client's 400, not our 500.
 */
const CODE_BY_SQLSTATE: Record<string, { code: string; message: string }> = {
  '22021': { code: 'invalid_string', message: 'A parameter contains a character that cannot be stored.' },
  '22P05': { code: 'invalid_string', message: 'A parameter contains a character that cannot be stored.' },
  '54001': { code: 'request_too_complex', message: 'The request is too complex to run.' },
};

/** The SQLSTATE of a PostgreSQL error, raw (pg) or wrapped by TypeORM (QueryFailedError.driverError). */
export function sqlState(exception: unknown): string | undefined {
  const e = exception as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = e?.driverError?.code ?? e?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** Turns any thrown value into the API's error envelope; the only place that knows HTTP status codes. */
export function toEnvelope(exception: unknown): { status: number; body: ErrorEnvelope } {
  if (exception instanceof DomainError || DomainError.isShape(exception)) {
    const e = exception as DomainErrorShape;
    return { status: e.status, body: { error: compact(e.type, e.message, e.param, e.code) } };
  }
  const fastifyCode = (exception as { code?: unknown } | null)?.code;
  const f = typeof fastifyCode === 'string' ? CODE_BY_FASTIFY[fastifyCode] : undefined;
  if (f) {
    return {
      status: f.status,
      body: { error: compact(TYPE_BY_STATUS[f.status] ?? 'invalid_request', f.message, undefined, f.code) },
    };
  }
  const state = sqlState(exception);
  const refusedByDatabase = state !== undefined ? CODE_BY_SQLSTATE[state] : undefined;
  if (refusedByDatabase) {
    return {
      status: 400,
      body: {
        error: compact('invalid_request', refusedByDatabase.message, undefined, refusedByDatabase.code),
      },
    };
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    const response = exception.getResponse();
    if (DomainError.isShape(response)) return toEnvelope(response);
    if (status === 404) {
      return {
        status,
        body: {
          error: compact('invalid_request', 'Unrecognized request URL.', undefined, 'route_not_found'),
        },
      };
    }
    // Nest re-wraps Fastify's own errors (body parsing, size limits) as HttpException(message, status), dropping
    // their code, so they are recognised here by status and message.
    const fastify = Object.values(CODE_BY_FASTIFY).find(
      (f) => f.status === status && (status !== 400 || /json/i.test(exception.message)),
    );
    if (fastify) {
      return {
        status,
        body: {
          error: compact(
            TYPE_BY_STATUS[status] ?? 'invalid_request',
            fastify.message,
            undefined,
            fastify.code,
          ),
        },
      };
    }
    const message = typeof response === 'string' ? response : (extractMessage(response) ?? exception.message);
    return {
      status,
      body: {
        error: compact(TYPE_BY_STATUS[status] ?? (status >= 500 ? 'api_error' : 'invalid_request'), message),
      },
    };
  }
  const statusCode = (exception as { statusCode?: unknown } | null)?.statusCode;
  if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) {
    const message = exception instanceof Error ? exception.message : 'Bad request.';
    return {
      status: statusCode,
      body: { error: compact(TYPE_BY_STATUS[statusCode] ?? 'invalid_request', message) },
    };
  }
  return {
    status: 500,
    body: {
      error: compact('api_error', 'An internal error occurred. It has been logged; retrying may succeed.'),
    },
  };
}

function extractMessage(response: unknown): string | undefined {
  if (typeof response !== 'object' || response === null) return undefined;
  const m = (response as { message?: unknown }).message;
  if (typeof m === 'string') return m;
  if (Array.isArray(m) && typeof m[0] === 'string') return m[0];
  return undefined;
}

function compact(type: ErrorType, message: string, param?: string, code?: string): ErrorEnvelope['error'] {
  return {
    type,
    message,
    ...(param !== undefined ? { param } : {}),
    ...(code !== undefined ? { code } : {}),
  };
}

@Catch()
export class ErrorEnvelopeFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  catch(exception: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const { status, body } = toEnvelope(exception);
    if (status >= 500) this.logger.error(exception instanceof Error ? exception : String(exception));
    // The edge checks should have refused it: say which one let it through.
    else if (sqlState(exception) !== undefined)
      this.logger.warn({
        msg: 'database refused a client value',
        sqlstate: sqlState(exception),
        error: String(exception),
      });
    void reply.status(status).header('content-type', 'application/json; charset=utf-8').send(body);
  }
}
