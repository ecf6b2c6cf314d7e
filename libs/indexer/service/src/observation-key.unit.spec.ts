import { chainObservationIsolationKey, type BusMessage } from '@stablepay/event-bus';
import {
  ERC20_TRANSFER_OBSERVED,
  OBSERVATION_RETRACTED,
  PAYMENT_DEPOSIT_EVENT_OBSERVED,
  SUBSCRIPTION_MANAGER_EVENT_OBSERVED,
  type ChainObservationEventType,
  watchedAddressOf,
} from '@stablepay/indexer-domain';

const DEPOSIT = '0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B';
const TOKEN = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const MANAGER = '0x1111111111111111111111111111111111111111';

describe('watchedAddressOf', () => {
  const cases: Array<[ChainObservationEventType, Record<string, string>, string]> = [
    [ERC20_TRANSFER_OBSERVED, { to: DEPOSIT, contract: TOKEN }, DEPOSIT],
    [PAYMENT_DEPOSIT_EVENT_OBSERVED, { contract: DEPOSIT }, DEPOSIT],
    [SUBSCRIPTION_MANAGER_EVENT_OBSERVED, { contract: MANAGER }, MANAGER],
    [OBSERVATION_RETRACTED, { address: MANAGER }, MANAGER],
  ];

  it.each(cases)(
    '%s is about its watched address, which the consumers key it by (chainObservationIsolationKey)',
    (type, data, address) => {
      expect(watchedAddressOf(type, data)).toBe(address);
      // The producer's address and the consumers' key agree, so a retraction goes where its observation went.
      const message: BusMessage = {
        id: 'evt',
        topic: 'indexer.chain-observation.v1',
        key: 'chain-eip155:8453',
        type,
        data,
        metadata: {},
        revision: 0,
        recordedAt: new Date(0).toISOString(),
      };
      expect(chainObservationIsolationKey(message)).toBe(`chain-eip155:8453:${address.toLowerCase()}`);
    },
  );
});
