import type { ContextType } from '@nestjs/common';
import { InterceptorsConsumer } from '@nestjs/core/interceptors/interceptors-consumer';

/**
 * Implemented by an interceptor that can tell from the request alone that it would only pass the call through
 * (`return next.handle()`): `[IDLE_FOR](args, type)` with Nest's handler arguments (`[request, reply, next]` for
 * HTTP) and the context type. See installIdleInterceptorSkip.
 */
export const IDLE_FOR = Symbol.for('stablepay.idleFor');

export interface IdleAware {
  [IDLE_FOR](args: readonly unknown[], type: ContextType | undefined): boolean;
}

const INSTALLED = Symbol.for('stablepay.idleInterceptorSkip');

type Intercept = (
  this: InterceptorsConsumer,
  interceptors: readonly unknown[],
  args: unknown[],
  instance: object,
  callback: (...args: unknown[]) => unknown,
  next: () => Promise<unknown>,
  type?: ContextType,
) => Promise<unknown>;

const idle = (interceptor: unknown, args: readonly unknown[], type: ContextType | undefined): boolean =>
  typeof (interceptor as Partial<IdleAware>)[IDLE_FOR] === 'function' &&
  (interceptor as IdleAware)[IDLE_FOR](args, type);

/**
 * Lets a route run as if it had no interceptors when every one of them says it is idle for the request. Nest runs
 * any interceptor list, even one that only returns `next.handle()`, through an rxjs pipeline built per request
 * (`defer` + `mergeAll` per interceptor, an `AsyncResource.bind` per step, whose two deprecation wrappers Node 20
 * makes on every call, and `lastValueFrom` on the result): with the global Idempotency-Key interceptor that was
 * about 5% of the gateway's CPU on a create without a key (docs/benchmarks.md). With no interceptor, Nest calls the
 * handler directly (pipes, handler, the same response and error handling), which is what an idle list amounts to.
 * Patches the loaded @nestjs/core's InterceptorsConsumer once; a list with any other interceptor runs as before.
 */
export function installIdleInterceptorSkip(): void {
  const prototype = InterceptorsConsumer.prototype as unknown as { intercept: Intercept } & Record<
    symbol,
    boolean
  >;
  if (prototype[INSTALLED]) return;
  prototype[INSTALLED] = true;
  const intercept = prototype.intercept;
  prototype.intercept = function interceptUnlessIdle(interceptors, args, instance, callback, next, type) {
    if (interceptors.length > 0 && interceptors.every((i) => idle(i, args, type))) return next();
    return intercept.call(this, interceptors, args, instance, callback, next, type);
  };
}
