import { chainObservationIsolationKey, recordingBus } from '@stablepay/event-bus';
import { DepositFlow } from './deposit-flow';

describe('DepositFlow consumers', () => {
  it("isolates chain observations per deposit address, so one payment's observation that cannot be handled holds back only that payment (not the chain)", async () => {
    const { bus, consumers: consumed } = recordingBus();
    const none = {} as never;
    const flow = new DepositFlow(
      { enabled: true, addresses: { paymentFactory: '0x1', registry: '0x2' }, chains: [] } as never,
      { set: {} } as never,
      none,
      none,
      none,
      bus,
      none,
      none,
      none,
      none,
      none,
      none,
      none,
      none,
      none,
      none,
      none,
      none,
    );
    await flow.onApplicationBootstrap();
    await flow.beforeApplicationShutdown();
    const observations = consumed.find((c) => c.topics.includes('indexer.chain-observation.v1'));
    expect(observations?.isolationKey).toBe(chainObservationIsolationKey);
  });
});
