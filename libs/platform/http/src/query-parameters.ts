import type { CallHandler, ContextType, ExecutionContext, NestInterceptor } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Observable } from 'rxjs';
import { validationError } from '@stablepay/util';
import { IDLE_FOR, type IdleAware } from './idle-interceptors';

/** Methods whose parameters travel in the URL: their routes check their own query (list filters, pagination). */
const QUERY_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A write (POST, PUT, PATCH, DELETE) takes its parameters in its JSON body only, so any query parameter on it is
 * unknown, and refused as an unknown body field is (the validation pipe) and as an unknown filter of a list is:
 * 400 `validation_error` naming it. Ignoring it silently would let `POST /settings/webhook/secret?dry_run=true`
 * do what the client thought it had asked not to do.
 *
 * An interceptor, so it runs where the body's check runs: after authentication (a bad key is still 401), and,
 * registered before the Idempotency-Key interceptor, before a key is claimed (a refused write stores nothing).
 */
export class UnknownQueryInterceptor implements NestInterceptor, IdleAware {
  [IDLE_FOR](args: readonly unknown[], type: ContextType | undefined): boolean {
    if (type !== 'http') return true;
    const request = args[0] as FastifyRequest;
    return QUERY_METHODS.has(request.method) || !hasQuery(request);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (!this[IDLE_FOR](context.getArgs(), context.getType())) {
      const query = context.switchToHttp().getRequest<FastifyRequest>().query as Record<string, unknown>;
      const [name = ''] = Object.keys(query);
      const param = name === '' ? 'query' : name;
      throw validationError(
        param,
        `Received unknown parameter: ${param} (in the query string; this request takes its parameters in the JSON body).`,
      );
    }
    return next.handle();
  }
}

function hasQuery(request: FastifyRequest): boolean {
  // Most writes carry no `?` at all: no key listing on their path.
  if (!request.url.includes('?')) return false;
  const query = request.query;
  return typeof query === 'object' && query !== null && Object.keys(query).length > 0;
}
