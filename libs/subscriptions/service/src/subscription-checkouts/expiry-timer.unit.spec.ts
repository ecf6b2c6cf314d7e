import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { CLOCK, EVENT_STORE, Projections } from '@stablepay/aggregate';
import type { ProjectionRunner } from '@stablepay/event-bus';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { SubscriptionCheckoutChanges } from './changes';
import { SubscriptionCheckoutExpiryTimer } from './expiry-timer';
import { SubscriptionCheckoutCommands } from './subscription-checkout.commands';
import { SubscriptionCheckoutProjection } from './subscription-checkout.projection';
import { SubscriptionCheckoutReader } from './subscription-checkout.reader';

const order: string[] = [];
let fireStarted!: () => void;
const firing = new Promise<void>((resolve) => (fireStarted = resolve));
let releaseFire!: () => void;
const fireReleased = new Promise<void>((resolve) => (releaseFire = resolve));

/** The projection's runner: its stop is what the expiring intent's read-your-writes wait needs not to happen yet. */
@Injectable()
class RecordingProjections {
  async start(): Promise<ProjectionRunner> {
    return { caughtUp: async () => undefined } as unknown as ProjectionRunner;
  }
  async stop(): Promise<void> {
    order.push('projection stopped');
  }
}

/** One intent due: its expiry is in flight (waiting for its row) when the stop arrives. */
const reader = {
  dueForExpiry: jest
    .fn()
    .mockResolvedValueOnce([
      { id: 'schk_due', merchant_id: 'mer_1', mode: 'test', expires_at: '2030-01-01T00:00:00.000Z' },
    ])
    .mockResolvedValue([]),
};
const commands = {
  expire: async () => {
    fireStarted();
    await fireReleased;
    order.push('expiry read its row');
    return { changed: true };
  },
};

@Module({
  providers: [
    SubscriptionCheckoutProjection,
    SubscriptionCheckoutExpiryTimer,
    SubscriptionCheckoutChanges,
    { provide: Projections, useClass: RecordingProjections },
    { provide: DataSource, useValue: {} },
    { provide: EVENT_STORE, useValue: {} },
    { provide: CLOCK, useValue: { now: () => new Date('2030-01-02T00:00:00Z') } },
    { provide: SUBSCRIPTIONS_CONFIG, useValue: { expiryPollIntervalMs: 60_000 } as SubscriptionsConfig },
    { provide: SubscriptionCheckoutReader, useValue: reader },
    { provide: SubscriptionCheckoutCommands, useValue: commands },
  ],
})
class CheckoutsModule {}

describe('stopping the subscriptions service while the checkout expiry timer is expiring an intent', () => {
  it('stops the timer, letting its expiry read its row, before the projection it reads stops', async () => {
    const app = await Test.createTestingModule({ imports: [CheckoutsModule] }).compile();
    await app.init();
    await firing;
    const timer = app.get(SubscriptionCheckoutExpiryTimer);
    const stopTimer = timer.onModuleDestroy.bind(timer);
    // The expiry in flight goes on as soon as the stop begins: its row is there once the projection applies it.
    jest.spyOn(timer, 'onModuleDestroy').mockImplementation(() => {
      releaseFire();
      return stopTimer();
    });
    await app.close();
    // Stopped in the same hook, the projection went first and the expiry waited for a row that never came
    // ("subscription-checkout-expiry timer tick failed ... not readable yet").
    expect(order).toEqual(['expiry read its row', 'projection stopped']);
  });
});
