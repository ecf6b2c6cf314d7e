import type { BusMessage } from './event-bus.port';
import { chainObservationIsolationKey } from './chain-observation-key';

const STREAM = 'chain-eip155:8453';
const DEPOSIT = '0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B';
const MANAGER = '0x1111111111111111111111111111111111111111';
const TOKEN = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

const observed = (type: string, data: unknown): BusMessage => ({
  id: `${type}:1`,
  topic: 'indexer.chain-observation.v1',
  key: STREAM,
  type,
  data,
  metadata: {},
  revision: 0,
  recordedAt: new Date(0).toISOString(),
});

describe('chainObservationIsolationKey', () => {
  it("keys a deposit's transfers, its contract's events and their retractions alike: the chain and the deposit address", () => {
    const key = `${STREAM}:${DEPOSIT.toLowerCase()}`;
    // A transfer's `contract` is the token's: the recipient is what the payment is about.
    expect(
      chainObservationIsolationKey(
        observed('Erc20TransferObserved.v1', { to: DEPOSIT, contract: TOKEN, from: MANAGER }),
      ),
    ).toBe(key);
    expect(
      chainObservationIsolationKey(observed('PaymentDepositEventObserved.v1', { contract: DEPOSIT })),
    ).toBe(key);
    expect(
      chainObservationIsolationKey(observed('ObservationRetracted.v1', { address: DEPOSIT.toLowerCase() })),
    ).toBe(key);
  });

  it("keys a subscription manager's events by the manager", () => {
    expect(
      chainObservationIsolationKey(observed('SubscriptionManagerEventObserved.v1', { contract: MANAGER })),
    ).toBe(`${STREAM}:${MANAGER}`);
  });

  it('leaves a retraction published before retractions named their address, and an unknown type, unattributed', () => {
    expect(
      chainObservationIsolationKey(observed('ObservationRetracted.v1', { observationId: 'x' })),
    ).toBeUndefined();
    expect(chainObservationIsolationKey(observed('BlockNoted.v1', { contract: MANAGER }))).toBeUndefined();
  });
});
