import { Wallet } from 'ethers';
import { PayoutDeposits } from '@stablepay/chain-operator';
import { connectTestStablecoin } from '@stablepay/contracts';
import { EVENT_BUS, type BusMessage, type EventBus } from '@stablepay/event-bus';
import { ERC20_TRANSFER_OBSERVED, type Erc20TransferObservedData } from '@stablepay/indexer-domain';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  LOCAL_PAYOUT_OFF_RAMP,
  localChainProvider,
  startLocalChains,
  type LocalChains,
} from '@stablepay/local-chains';
import { RelayerSet } from '@stablepay/relayer';
import type { RunningService } from '@stablepay/runtime';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { startIndexerOnChain } from './testing/indexer-on-chain';
import { WatchCommandsHandler } from './watch-commands.handler';

/**
 * Payouts (beta): a customer's deposit address registered the way docs/chain-operator.md tells a consumer to
 * (`PayoutDeposits.watch` through the indexer's watch command) has every ERC-20 transfer to it observed
 * (payout.deposit_detected), and its sweep to the off-ramp is not observed as a deposit.
 */
describe('payout deposit addresses in the indexer', () => {
  let database: TestDatabase;
  let chains: LocalChains;
  let service: RunningService;
  let relayers: RelayerSet;

  beforeAll(async () => {
    [database, chains] = await Promise.all([createTestDatabase(), startLocalChains({ chainIds: [8453] })]);
    const chain = chains.chains[0];
    if (!chain) throw new Error('no local chain');
    service = await startIndexerOnChain({ databaseUrl: database.url, chain, pollMs: 50 });
    relayers = new RelayerSet(
      [{ caip2: chain.caip2, chainId: BigInt(chain.chainId), rpcUrl: chain.rpcUrl }],
      {
        privateKey: chains.operator.privateKey,
      },
    );
  });

  afterAll(async () => {
    relayers?.destroy();
    await service?.stop();
    await chains?.stop();
    await database?.drop();
  });

  it('observes the deposit, not the sweep', async () => {
    const chain = chains.chains[0];
    if (!chain) throw new Error('no local chain');
    const provider = localChainProvider(chain.rpcUrl, chain.chainId);
    const received: BusMessage[] = [];
    const bus = service.app.get<EventBus>(EVENT_BUS);
    const subscription = await bus.consume({
      group: 'payout-deposit-watch-test',
      topics: ['indexer.chain-observation.v1'],
      handler: async (message) => {
        received.push(message);
      },
    });
    try {
      const payouts = new PayoutDeposits(relayers, {
        factory: chain.addresses.payoutDepositFactory,
        offRamp: LOCAL_PAYOUT_OFF_RAMP,
      });
      const handler = service.app.get(WatchCommandsHandler);
      const customer = { merchantId: 'mer_indexer', customerId: 'cus_indexer' };
      const address = await payouts.watch(customer, handler);
      // A second customer's address: its deposit, sent after the sweep, marks that the indexer got past the sweep.
      const sentinel = await payouts.watch({ ...customer, customerId: 'cus_sentinel' }, handler);

      const payer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '', provider);
      const usdc = connectTestStablecoin(chain.addresses.stablecoins.USDC, payer);
      await (await usdc.mint(payer.address, 30_000_000n)).wait();
      await (await usdc.transfer(address, 25_000_000n)).wait();
      const swept = await payouts.sweep({
        ...customer,
        chain: chain.caip2,
        token: await usdc.getAddress(),
        amount: 25_000_000n,
        payoutId: 'po_indexer',
      });
      expect(swept).toMatchObject({ kind: 'swept', amount: 25_000_000n });
      await (await usdc.transfer(sentinel, 5_000_000n)).wait();

      const deadline = Date.now() + 15_000;
      const observedTo = (to: string) =>
        received.some((m) => (m.data as Erc20TransferObservedData).to === to);
      while (!observedTo(sentinel) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const transfers = received
        .filter((m) => m.type === ERC20_TRANSFER_OBSERVED)
        .map((m) => m.data as Erc20TransferObservedData);
      expect(transfers.map((t) => [t.from, t.to, t.amount])).toEqual([
        [payer.address, address, '25000000'],
        [payer.address, sentinel, '5000000'],
      ]);
      expect(received.map((m) => m.key)).toEqual([`chain-${chain.caip2}`, `chain-${chain.caip2}`]);
    } finally {
      await subscription.stop();
      provider.destroy();
    }
  });
});
