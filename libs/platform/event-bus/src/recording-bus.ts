import type { ConsumeOptions, EventBus } from './event-bus.port';

/**
 * A test double: a bus that keeps each consumer's options and delivers nothing (a test calls the handlers itself,
 * or checks how a service subscribes).
 */
export function recordingBus(): { readonly bus: EventBus; readonly consumers: ConsumeOptions[] } {
  const consumers: ConsumeOptions[] = [];
  const bus: EventBus = {
    publish: async () => undefined,
    close: async () => undefined,
    consume: async (options) => {
      consumers.push(options);
      return { caughtUp: async () => undefined, stop: async () => undefined };
    },
  };
  return { bus, consumers };
}
