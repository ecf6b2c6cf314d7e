import { chainObservationIsolationKey, recordingBus } from '@stablepay/event-bus';
import { CHAIN_OBSERVATION_TOPIC, ChainObservationsConsumer } from './chain-observations.consumer';

describe('ChainObservationsConsumer', () => {
  it("isolates chain observations per subscription manager, so one merchant's manager event that cannot be handled holds back only that manager (not the chain)", async () => {
    const { bus, consumers: consumed } = recordingBus();
    const consumer = new ChainObservationsConsumer(bus, {} as never, {} as never);
    await consumer.onApplicationBootstrap();
    expect(consumed.map((c) => [c.topics, c.isolationKey])).toEqual([
      [[CHAIN_OBSERVATION_TOPIC], chainObservationIsolationKey],
    ]);
  });
});
