import {
  type CallHandler,
  type ContextType,
  type ExecutionContext,
  type NestInterceptor,
  SetMetadata,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import type { Observable } from 'rxjs';
import { type DomainError, unknownParameter } from '@stablepay/util';
import { IDLE_FOR, type IdleAware } from './idle-interceptors';

const ACCEPTED_QUERY = 'stablepay:acceptedQuery';
const ANY_QUERY = 'any';
type Accepted = ReadonlySet<string> | typeof ANY_QUERY;
const NONE: Accepted = new Set();

/** Methods whose parameters may travel in the URL; the others (writes) take theirs in the JSON body. */
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Declares the query parameters a route takes (a list's pagination and filters), on the handler or its
 * controller: the one place they are named. Any other is refused by UnknownQueryInterceptor; a route without this
 * declaration takes none (a read of one resource, every write).
 */
export const QueryParameters = (names: Iterable<string>): ClassDecorator & MethodDecorator =>
  SetMetadata(ACCEPTED_QUERY, new Set(names));

/**
 * A route whose query string is not the API's to read: the hosted pages, opened by payers' browsers from links that
 * marketing and mail tools decorate (`utm_*`, `gclid`, `fbclid`...), and the probes and metrics, whose callers
 * (load balancers, uptime checks, scrapers) may add their own; a refused liveness probe would get the process
 * killed. None of them takes a parameter a typo could change, so every query parameter is ignored.
 */
export const IgnoreQueryParameters = (): ClassDecorator & MethodDecorator =>
  SetMetadata(ACCEPTED_QUERY, ANY_QUERY);

/** 400 validation_error code unknown_parameter, as Stripe words it, with what the route does take. */
function unknownQueryParameter(name: string, method: string, accepted: ReadonlySet<string>): DomainError {
  // `?=x` has a parameter without a name.
  const param = name === '' ? 'query' : name;
  const takes =
    accepted.size > 0
      ? `this request takes ${[...accepted].join(', ')}`
      : READ_METHODS.has(method)
        ? 'this request takes no query parameters'
        : 'in the query string; this request takes its parameters in the JSON body';
  return unknownParameter(param, takes);
}

/**
 * Refuses a query parameter the route does not declare (QueryParameters), on every method, as an unknown body field
 * is refused (the validation pipe): 400 `validation_error` code `unknown_parameter` naming it. Ignored, a typo
 * (`GET /payments?staus=failed`, `?limt=5`) would answer as if the client had asked for something else, and
 * `POST /settings/webhook/secret?dry_run=true` would do what the client thought it had asked not to do.
 *
 * An interceptor, so it runs where the body's check runs: after authentication (a bad key is still 401), and,
 * registered before the Idempotency-Key interceptor, before a key is claimed (a refused write stores nothing).
 * Idle (skipped) on a request without a query string, which is most of them.
 */
export class UnknownQueryInterceptor implements NestInterceptor, IdleAware {
  private readonly reflector = new Reflector();

  [IDLE_FOR](args: readonly unknown[], type: ContextType | undefined): boolean {
    return type !== 'http' || !hasQuery(args[0] as FastifyRequest);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (!this[IDLE_FOR](context.getArgs(), context.getType())) {
      const accepted =
        this.reflector.getAllAndOverride<Accepted | undefined>(ACCEPTED_QUERY, [
          context.getHandler(),
          context.getClass(),
        ]) ?? NONE;
      if (accepted !== ANY_QUERY) {
        const request = context.switchToHttp().getRequest<FastifyRequest>();
        for (const name of Object.keys(request.query as Record<string, unknown>))
          if (!accepted.has(name)) throw unknownQueryParameter(name, request.method, accepted);
      }
    }
    return next.handle();
  }
}

function hasQuery(request: FastifyRequest): boolean {
  // Most requests carry no `?` at all: no key listing on their path.
  if (!request.url.includes('?')) return false;
  const query = request.query;
  return typeof query === 'object' && query !== null && Object.keys(query).length > 0;
}
