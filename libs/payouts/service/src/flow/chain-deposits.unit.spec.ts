import type { EventBus } from '@stablepay/event-bus';
import { register } from 'prom-client';
import { PayoutChainDeposits } from './chain-deposits';
import type { PayoutChains } from '../payouts.config';

describe('PayoutChainDeposits metrics', () => {
  it("starts every chain's retracted-after-forward series at 0, so the alert's increase() counts the first one", async () => {
    const chain = 'eip155:434343';
    const bus = {
      consume: () => Promise.resolve({ stop: () => Promise.resolve(), caughtUp: () => Promise.resolve() }),
    } as unknown as EventBus;
    const chains = {
      enabled: true,
      payouts: {
        factory: '0x00000000000000000000000000000000000000fa',
        offRamp: '0x00000000000000000000000000000000000000fb',
      },
      chains: [{ caip2: chain }],
    } as unknown as PayoutChains;
    const deposits = new PayoutChainDeposits(
      bus,
      never(),
      never(),
      never(),
      never(),
      never(),
      never(),
      chains,
    );
    await deposits.onApplicationBootstrap();
    await deposits.beforeApplicationShutdown();
    const metric = await register
      .getSingleMetric('stablepay_payout_deposit_retracted_after_forward_total')
      ?.get();
    expect(metric?.values.filter((v) => v.labels.chain === chain).map((v) => v.value)).toEqual([0]);
  });
});

function never<T>(): T {
  return {} as T;
}
