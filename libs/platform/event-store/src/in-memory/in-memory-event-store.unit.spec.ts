import { describeEventStoreConformance } from '../event-store.conformance';
import { InMemoryEventLog, InMemoryEventStore } from './in-memory-event-store';

describeEventStoreConformance('InMemoryEventStore', async () => {
  const log = new InMemoryEventLog();
  return {
    open: async () =>
      new InMemoryEventStore(log, { subscriptions: { retry: { initialMs: 10, maxMs: 100 } } }),
    dispose: async () => undefined,
  };
});

describe('catch-up subscription lifecycle (on the in-memory store)', () => {
  const event = (id: string) => ({ id, type: 'Noted', data: {} });

  it('stopping while a handler keeps failing keeps the checkpoint just before the failing event', async () => {
    const store = new InMemoryEventStore(new InMemoryEventLog(), {
      subscriptions: { retry: { initialMs: 5, maxMs: 5 } },
    });
    await store.appendToStream('note-1', [event('a'), event('b'), event('c')]);
    const handled: string[] = [];
    let attemptsOnB = 0;
    const failing = await store.subscribeToAll({
      subscriptionId: 'notes',
      handler: async (e) => {
        if (e.id === 'b') {
          attemptsOnB++;
          throw new Error('down');
        }
        handled.push(e.id);
      },
    });
    await until(() => attemptsOnB >= 3);
    await failing.stop();
    expect(handled).toEqual(['a']);
    expect(store.log.checkpoints.get('notes')).toBe(1n);

    const healthy = await store.subscribeToAll({
      subscriptionId: 'notes',
      handler: async (e) => {
        handled.push(e.id);
      },
    });
    await healthy.caughtUp();
    await healthy.stop();
    expect(handled).toEqual(['a', 'b', 'c']);
  });

  it('caughtUp on a stopped subscription rejects instead of waiting forever', async () => {
    const store = new InMemoryEventStore();
    const subscription = await store.subscribeToAll({ subscriptionId: 's', handler: async () => undefined });
    await subscription.stop();
    await expect(subscription.caughtUp()).rejects.toThrow(/stopped/);
  });

  it('a handler still running when stop is called finishes, and its event counts as handled', async () => {
    const store = new InMemoryEventStore();
    await store.appendToStream('note-1', [event('x')]);
    let release: (() => void) | undefined;
    const subscription = await store.subscribeToAll({
      subscriptionId: 's',
      handler: () => new Promise<void>((resolve) => (release = resolve)),
    });
    const waiting = subscription.caughtUp();
    await until(() => release !== undefined);
    const stopping = subscription.stop();
    release?.();
    await stopping;
    await expect(waiting).resolves.toBeUndefined();
    expect(store.log.checkpoints.get('s')).toBe(1n);
  });
});

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
