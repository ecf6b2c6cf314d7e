import type { BusMessage, EventBus } from '@stablepay/event-bus';
import { SCREENING_OUTAGE_GRACE_MS, type SanctionsScreening, type ScreeningResult } from '@stablepay/evm';
import type { SubscriptionCommands } from './subscription.commands';
import { SubscriberScreeningConsumer } from './subscriber-screening.consumer';

const start = new Date('2026-11-24T07:00:00.000Z');
const SUBSCRIBER = '0x2222222222222222222222222222222222222222';

function consumerWith(results: ScreeningResult[]) {
  let clock = start;
  const flagged: string[] = [];
  const screening: SanctionsScreening = {
    screen: () => Promise.resolve(results.shift() ?? { kind: 'clear' }),
  };
  const commands = {
    now: () => clock,
    run: (id: string) => {
      flagged.push(id);
      return Promise.resolve();
    },
  } as unknown as SubscriptionCommands;
  const consumer = new SubscriberScreeningConsumer({} as EventBus, screening, commands);
  const message = {
    id: 'evt_1',
    key: 'subscription-sub_1',
    type: 'SubscriptionCreated.v1',
    data: { subscriber: SUBSCRIBER },
    metadata: { merchantId: 'mer_1', mode: 'test' },
  } as unknown as BusMessage;
  return { consumer, message, flagged, at: (ms: number) => (clock = new Date(start.getTime() + ms)) };
}

describe('SubscriberScreeningConsumer: an unreachable provider', () => {
  it('is retried as an outage (never parked) for SCREENING_OUTAGE_GRACE_MS from the first failure, then parked; the subscription is neither flagged nor let through', async () => {
    const { consumer, message, flagged, at } = consumerWith(
      Array.from({ length: 3 }, () => ({ kind: 'unreachable' }) as const),
    );
    await expect(consumer.handle(message)).rejects.toMatchObject({ retryable: true });
    at(SCREENING_OUTAGE_GRACE_MS - 1);
    await expect(consumer.handle(message)).rejects.toMatchObject({ retryable: true });
    at(SCREENING_OUTAGE_GRACE_MS);
    await expect(consumer.handle(message)).rejects.toMatchObject({ retryable: false });
    expect(flagged).toEqual([]);
  });

  it('screens the wallet once the provider answers again (a match flags the subscription)', async () => {
    const { consumer, message, flagged } = consumerWith([
      { kind: 'unreachable' },
      { kind: 'match', address: SUBSCRIBER },
    ]);
    await expect(consumer.handle(message)).rejects.toMatchObject({ retryable: true });
    await consumer.handle(message);
    expect(flagged).toEqual(['sub_1']);
  });
});
