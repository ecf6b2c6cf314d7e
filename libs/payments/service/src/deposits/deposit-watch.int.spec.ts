import { type JsonRpcProvider, Wallet } from 'ethers';
import type { DataSource } from 'typeorm';
import type { WatchAddressCommand } from '@stablepay/chain-operator';
import type { BusMessage } from '@stablepay/event-bus';
import { transfersAroundCreation } from '@stablepay/local-chains';
import { ManualClock } from '@stablepay/util';
import { DepositFlow } from './deposit-flow';
import { type DepositTestbed, startDepositTestbed } from './test-support/deposit-testbed';

/**
 * The customer has the deposit address as soon as the checkout answers; the flow asks the indexer to watch it when it
 * consumes PaymentCreated, later by the bus's lag. A transfer mined in between (and already scanned by the indexer's
 * follower) must still be in the watch's range: a watch from the follower's checkpoint never sees it and the payment
 * stays pending with the funds at its address. A real anvil and queue table (PostgreSQL or PGlite); the indexer's
 * watch command is a stand-in recording what it is asked.
 */
const CHAIN = 'eip155:8453';
const DEPOSIT = Wallet.createRandom().address;

let provider: JsonRpcProvider;
let dataSource: DataSource;
let testbed: DepositTestbed;

beforeAll(async () => {
  testbed = await startDepositTestbed();
  ({ provider, dataSource } = testbed);
});

afterAll(async () => {
  await testbed?.stop();
});

/** The flow with its worker stopped; the watch command recorded, the payment not created (nothing to advance). */
function depositFlow(asked: WatchAddressCommand[]): DepositFlow {
  const none = {} as never;
  return new DepositFlow(
    {
      enabled: true,
      addresses: { paymentFactory: '0x1', registry: '0x2' },
      chains: [{ caip2: CHAIN, confirmations: 1, stablecoins: [] }],
    } as never,
    { set: { for: () => ({ provider }) } } as never,
    {
      watchAddress: async (command: WatchAddressCommand) => {
        asked.push(command);
        return { created: true };
      },
    } as never,
    none,
    dataSource,
    none,
    none,
    new ManualClock(new Date()),
    { load: async () => ({ state: {}, mode: 'test' }) } as never,
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
}

describe('the deposit address watch', () => {
  it("covers a transfer mined between the payment's creation and the watch's registration", async () => {
    const { old, created, paid } = await transfersAroundCreation(provider, DEPOSIT);

    const asked: WatchAddressCommand[] = [];
    const flow = depositFlow(asked);
    await flow.beforeApplicationShutdown();
    await flow.onPaymentEvent({
      id: 'm1',
      topic: 'payments.payment.v1',
      key: 'payment-pay_watch',
      type: 'PaymentCreated.v1',
      data: {
        depositAddress: DEPOSIT,
        acceptedAssets: [{ chain: CHAIN }],
        createdAt: new Date(created.timestamp * 1000).toISOString(),
      },
    } as unknown as BusMessage);

    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ chain: CHAIN, address: DEPOSIT });
    // Without a first block the indexer starts the watch at its checkpoint, past the transfer.
    expect(asked[0]?.fromBlock).toBeDefined();
    expect(asked[0]?.fromBlock).toBeLessThanOrEqual(paid.blockNumber);
    expect(asked[0]?.fromBlock).toBeGreaterThanOrEqual(old.blockNumber);
  }, 60_000);
});
