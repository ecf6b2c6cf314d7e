import { type JsonRpcProvider, Wallet } from 'ethers';
import type { WatchAddressCommand } from '@stablepay/chain-operator';
import type { BusMessage, EventBus } from '@stablepay/event-bus';
import { createChainRegistry } from '@stablepay/evm';
import {
  type AnvilNode,
  localChainProvider,
  startAnvil,
  transfersAroundCreation,
} from '@stablepay/local-chains';
import type { PayoutChains, PayoutsConfig } from '../payouts.config';
import { PAYOUT_DEPOSIT_WATCH_GROUP, PayoutChainDeposits } from './chain-deposits';

/**
 * The merchant has the customer's deposit address in the answer of POST /customers; the watch is registered when the
 * deposit-watch consumer handles CustomerCreated, later by the bus's lag. A transfer mined in between (in a block the
 * indexer's follower already scanned) must still be in the watch's range: a watch from the follower's checkpoint never
 * observes it, no payout is funded and the funds sit at the address (a sweep moves only a detected deposit). A real
 * anvil; the indexer's watch command is a stand-in recording what it is asked.
 */
const CHAIN = 'eip155:8453';
const DEPOSIT = Wallet.createRandom().address;
// Base's live tokens stand in for test mode's: only the funding chain matters to the watch.
const registry = createChainRegistry({ mode: 'live' });
const config: PayoutsConfig = {
  hostedUrl: null,
  chains: { live: registry, test: registry },
  supportedChains: null,
};

let anvil: AnvilNode;
let provider: JsonRpcProvider;

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 8453 });
  provider = localChainProvider(anvil.rpcUrl, 8453);
});

afterAll(async () => {
  provider?.destroy();
  await anvil?.stop();
});

/** The deposit-watch consumer's handler, as the payouts process wires it; the watch command recorded. */
async function watchHandler(asked: WatchAddressCommand[]): Promise<(message: BusMessage) => Promise<void>> {
  const handlers = new Map<string, (message: BusMessage) => Promise<void>>();
  const bus = {
    consume: async (c: { group: string; handler: (message: BusMessage) => Promise<void> }) => {
      handlers.set(c.group, c.handler);
      return { stop: async () => undefined, caughtUp: async () => undefined };
    },
  } as unknown as EventBus;
  const none = {} as never;
  const deposits = new PayoutChainDeposits(
    bus,
    none,
    none,
    none,
    none,
    {
      watchAddress: async (command: WatchAddressCommand) => {
        asked.push(command);
        return { created: true };
      },
    } as never,
    config,
    {
      enabled: true,
      payouts: { factory: '0x1', offRamp: '0x2' },
      chains: [{ caip2: CHAIN }],
    } as unknown as PayoutChains,
    { set: { for: () => ({ provider }) } } as never,
  );
  await deposits.onApplicationBootstrap();
  const handler = handlers.get(PAYOUT_DEPOSIT_WATCH_GROUP);
  if (!handler) throw new Error('no deposit-watch consumer');
  return handler;
}

describe("a customer's deposit address watch", () => {
  it("covers a transfer mined between the customer's creation and the watch's registration", async () => {
    const { old, created, paid } = await transfersAroundCreation(provider, DEPOSIT);

    const asked: WatchAddressCommand[] = [];
    const watch = await watchHandler(asked);
    await watch({
      id: 'm1',
      topic: 'payouts.customer.v1',
      key: 'customer-cus_watch',
      type: 'CustomerCreated.v1',
      data: {
        customerId: 'cus_watch',
        depositAddresses: [{ address: DEPOSIT, chains: [CHAIN], tokens: ['USDC'] }],
        createdAt: new Date(created.timestamp * 1000).toISOString(),
      },
      metadata: { merchantId: 'mer_watch', mode: 'test' },
    } as unknown as BusMessage);

    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ chain: CHAIN, address: DEPOSIT });
    // Without a first block the indexer starts the watch at its checkpoint, past the transfer.
    expect(asked[0]?.fromBlock).toBeDefined();
    expect(asked[0]?.fromBlock).toBeLessThanOrEqual(paid.blockNumber);
    expect(asked[0]?.fromBlock).toBeGreaterThanOrEqual(old.blockNumber);
  }, 60_000);
});
