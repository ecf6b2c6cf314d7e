import type { DataSource } from 'typeorm';
import { ManualClock } from '@stablepay/util';
import { IdempotencyInterceptor } from './idempotency.interceptor';

describe('IdempotencyInterceptor owner beats', () => {
  afterEach(() => jest.useRealTimers());

  it('an app closed while its first keyed request is still starting the beats leaves no beat timer behind', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    let letTheBeatThrough: () => void = () => undefined;
    const beatSent = new Promise<void>((resolve) => (letTheBeatThrough = resolve));
    const statements: string[] = [];
    // No pg pool under it: the interceptor's statements go through DataSource.query.
    const dataSource = {
      driver: {},
      query: async (text: string) => {
        statements.push(text.trim().split(/\s+/).slice(0, 3).join(' '));
        if (text.startsWith('INSERT INTO idempotency_owners')) await beatSent;
        return [];
      },
    } as unknown as DataSource;
    const interceptor = new IdempotencyInterceptor(dataSource, new ManualClock('2026-11-23T00:00:00Z'));

    const starting = (interceptor as unknown as { startBeating(): Promise<void> }).startBeating();
    await new Promise((r) => setImmediate(r));
    await interceptor.onModuleDestroy();
    letTheBeatThrough();
    await starting;

    expect(jest.getTimerCount()).toBe(0);
    const before = statements.length;
    jest.advanceTimersByTime(60_000);
    await new Promise((r) => setImmediate(r));
    expect(statements.slice(before)).toEqual([]);
  });
});
