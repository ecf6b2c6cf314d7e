import { Wallet, id } from 'ethers';
import {
  connectStablepayRegistry,
  connectSubscriptionManager,
  connectSubscriptionManagerFactory,
  connectTestStablecoin,
} from '@stablepay/contracts';
import { EVENT_BUS, type BusMessage, type EventBus } from '@stablepay/event-bus';
import {
  ERC20_TRANSFER_OBSERVED,
  SUBSCRIPTION_MANAGER_EVENT_OBSERVED,
  type Erc20TransferObservedData,
  type SubscriptionManagerEventObservedData,
} from '@stablepay/indexer-domain';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  localChainProvider,
  startLocalChains,
  type LocalChains,
} from '@stablepay/local-chains';
import type { RunningService } from '@stablepay/runtime';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { IndexerWatchList } from './indexer.module';
import { startIndexerOnChain } from './testing/indexer-on-chain';

/**
 * The indexer as it runs: the Nest service (migrations, event store, store-log bus, readiness) following a local
 * chain with the Stablepay contracts deployed; observations arrive on the bus topic.
 */
describe('indexer service on a local chain', () => {
  let database: TestDatabase;
  let chains: LocalChains;
  let service: RunningService;

  beforeAll(async () => {
    [database, chains] = await Promise.all([createTestDatabase(), startLocalChains({ chainIds: [8453] })]);
    const chain = chains.chains[0];
    if (!chain) throw new Error('no local chain');
    service = await startIndexerOnChain({ databaseUrl: database.url, chain, pollMs: 50 });
  });

  afterAll(async () => {
    await service?.stop();
    await chains?.stop();
    await database?.drop();
  });

  it('publishes deposits and subscription manager events on indexer.chain-observation.v1', async () => {
    const chain = chains.chains[0];
    if (!chain) throw new Error('no local chain');
    const provider = localChainProvider(chain.rpcUrl, chain.chainId);
    try {
      const operator = new Wallet(chains.operator.privateKey, provider);
      const pauserKey = ANVIL_DEV_PRIVATE_KEYS[2];
      const merchantPauser = new Wallet(pauserKey, provider);
      const merchantId = id('merchant:indexer-test');
      await (
        await connectStablepayRegistry(chain.addresses.registry, operator).registerMerchant(
          merchantId,
          Wallet.createRandom().address,
          operator.address,
        )
      ).wait();
      const factory = connectSubscriptionManagerFactory(chain.addresses.subscriptionManagerFactory, operator);
      await (await factory.deployManager(merchantId, merchantPauser.address)).wait();
      const manager = await factory.managerOf(merchantId);
      const deposit = Wallet.createRandom().address;

      const watchList = service.app.get(IndexerWatchList);
      expect(await watchList.watchContract(chain.caip2, manager, 'subscription_manager')).toBe(true);
      expect(await watchList.watchContract(chain.caip2, manager.toLowerCase(), 'subscription_manager')).toBe(
        false,
      );
      expect(await watchList.watchDepositAddress(chain.caip2, deposit)).toBe(true);

      const received: BusMessage[] = [];
      const bus = service.app.get<EventBus>(EVENT_BUS);
      const subscription = await bus.consume({
        group: 'indexer-test',
        topics: ['indexer.chain-observation.v1'],
        handler: async (message) => {
          received.push(message);
        },
      });
      try {
        await (await connectSubscriptionManager(manager, merchantPauser).pause()).wait();
        await (
          await connectTestStablecoin(chain.addresses.stablecoins.USDC, operator).mint(deposit, 42_000_000n)
        ).wait();

        const deadline = Date.now() + 15_000;
        while (received.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        expect(received.map((m) => [m.topic, m.key, m.type])).toEqual([
          ['indexer.chain-observation.v1', `chain-${chain.caip2}`, SUBSCRIPTION_MANAGER_EVENT_OBSERVED],
          ['indexer.chain-observation.v1', `chain-${chain.caip2}`, ERC20_TRANSFER_OBSERVED],
        ]);
        const [paused, paid] = received;
        expect(paused?.data as SubscriptionManagerEventObservedData).toMatchObject({
          chain: chain.caip2,
          contract: manager,
          event: 'Paused',
          args: { account: merchantPauser.address, role: '0' },
        });
        expect(paid?.data as Erc20TransferObservedData).toMatchObject({
          asset: `${chain.caip2}/erc20:${chain.addresses.stablecoins.USDC}`,
          to: deposit,
          amount: '42000000',
        });
      } finally {
        await subscription.stop();
      }

      const ready = await fetch(`${service.url}/ready`);
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { checks: Record<string, string> }).checks).toMatchObject({
        chain_followers: 'ok',
      });
    } finally {
      provider.destroy();
    }
  });
});
