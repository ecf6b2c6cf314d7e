import type { CallHandler, ContextType, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { InterceptorsConsumer } from '@nestjs/core/interceptors/interceptors-consumer';
import { lastValueFrom, map } from 'rxjs';
import { IDLE_FOR, type IdleAware, installIdleInterceptorSkip } from './idle-interceptors';

class Sometimes implements NestInterceptor, IdleAware {
  calls = 0;
  [IDLE_FOR](args: readonly unknown[], _type: ContextType | undefined): boolean {
    return (args[0] as { idle: boolean }).idle;
  }
  intercept(_context: ExecutionContext, next: CallHandler) {
    this.calls++;
    return next.handle().pipe(map((v) => `wrapped ${String(v)}`));
  }
}

class Always implements NestInterceptor {
  calls = 0;
  intercept(_context: ExecutionContext, next: CallHandler) {
    this.calls++;
    return next.handle();
  }
}

describe('installIdleInterceptorSkip', () => {
  beforeAll(() => installIdleInterceptorSkip());

  const run = async (interceptors: NestInterceptor[], idle: boolean) => {
    const result = await new InterceptorsConsumer().intercept(
      interceptors,
      [{ idle }, {}, () => undefined],
      {},
      () => undefined,
      async () => 'handled',
      'http',
    );
    // Nest's response controller takes either: a value or promise (no interceptors) or an observable.
    return typeof (result as { subscribe?: unknown }).subscribe === 'function'
      ? lastValueFrom(result as never)
      : result;
  };

  it('calls the handler directly when every interceptor is idle for the request', async () => {
    const sometimes = new Sometimes();
    expect(await run([sometimes], true)).toBe('handled');
    expect(sometimes.calls).toBe(0);
  });

  it('runs the interceptors as before when one of them is not idle', async () => {
    const sometimes = new Sometimes();
    expect(await run([sometimes], false)).toBe('wrapped handled');
    expect(sometimes.calls).toBe(1);

    // An interceptor that does not say it is idle is never skipped, nor are the others beside it.
    const idleOne = new Sometimes();
    const always = new Always();
    expect(await run([idleOne, always], true)).toBe('wrapped handled');
    expect([idleOne.calls, always.calls]).toEqual([1, 1]);
  });

  it('is installed once', () => {
    const patched = InterceptorsConsumer.prototype.intercept;
    installIdleInterceptorSkip();
    expect(InterceptorsConsumer.prototype.intercept).toBe(patched);
  });
});
