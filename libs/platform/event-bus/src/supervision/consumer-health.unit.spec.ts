import type { BusMessage } from '../event-bus.port';
import { ConsumerHealth } from './consumer-health';

describe('consumer health', () => {
  it('names the hanging handler call, not the backlog probe it leaves unanswered, though the probe began first', async () => {
    let now = 1_000_000;
    const health = new ConsumerHealth('test.health', false, {
      clock: () => now,
      stalledAfterMs: 300,
      probeIntervalMs: 5,
    });
    health.startProbing(() => new Promise<void>(() => undefined));
    try {
      // Let one probe begin (its interval runs on real time), then a handler call begins later and hangs.
      await new Promise((r) => setTimeout(r, 30));
      now += 100;
      health.began([{ id: 'm-1', topic: 't', key: 'payment-1', revision: 0 } as unknown as BusMessage]);
      now += 1_000;
      const status = health.status();
      expect(status.stalled).toBe(true);
      expect(status.reason).toMatch(/no progress for 1 s with work pending: a handler call running for 1 s/);
    } finally {
      health.stopProbing();
    }
  });
});
