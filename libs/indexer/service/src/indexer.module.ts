import {
  type DynamicModule,
  Inject,
  Injectable,
  Module,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import { CLOCK, EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { ReadinessRegistry } from '@stablepay/http';
import type { ServiceDefinition } from '@stablepay/runtime';
import { type Clock, JsonLogger } from '@stablepay/util';
import { ChainFollower, type FollowerStatus } from './chain-follower';
import { JsonRpcChainClient } from './chain-rpc';
import { trackFollowers, untrackFollowers } from './follower-metrics';
import { indexerConfigFromEnv, type IndexerConfig } from './indexer.config';
import { IndexerStore } from './indexer-store';
import { INDEXER_MIGRATIONS } from './migrations';
import { WatchCommandsHandler } from './watch-commands.handler';
import { IndexerWatchList } from './watch-list';

export { IndexerWatchList } from './watch-list';

export const INDEXER_CONFIG = Symbol('INDEXER_CONFIG');

/** Starts one follower per configured chain once the application is up, and stops them before the store closes. */
@Injectable()
export class ChainFollowers implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private readonly followers: ChainFollower[];
  private readonly clients: JsonRpcChainClient[];

  constructor(
    @Inject(INDEXER_CONFIG) config: IndexerConfig,
    @Inject(DataSource) dataSource: DataSource,
    @Inject(EVENT_STORE) events: EventStore,
    @Inject(CLOCK) clock: Clock,
    @Inject(ReadinessRegistry) private readonly readiness: ReadinessRegistry,
  ) {
    const store = new IndexerStore(dataSource);
    const logger = new JsonLogger('indexer');
    const pairs = config.chains.map((chain) => {
      const client = new JsonRpcChainClient(chain.rpcUrl, chain.chainId);
      const settings = {
        chain,
        pollMs: config.pollMs,
        batchBlocks: config.batchBlocks,
        reorgWindow: config.reorgWindow,
        ...(config.stalledAfterMs !== undefined ? { stalledAfterMs: config.stalledAfterMs } : {}),
        ...(config.leaseOwner !== undefined ? { leaseOwner: config.leaseOwner } : {}),
      };
      return { client, follower: new ChainFollower(settings, client, store, events, logger, clock) };
    });
    this.clients = pairs.map((p) => p.client);
    this.followers = pairs.map((p) => p.follower);
  }

  onModuleInit(): void {
    // A halted follower (wrong chain behind its URL, a reorg deeper than the window) needs an operator: the
    // service reports not ready. A node that hangs or fails is retried and only degrades readiness (200, with
    // "<chain> RPC unanswered for N s"): the other chains and the API still serve, and every replica asks the same
    // node, so taking this one out of the balancer would help nothing (as parked streams degrade projections).
    // Without chains there is nothing to report (embedded mode without local chains).
    if (this.followers.length === 0) return;
    trackFollowers(this.followers);
    this.readiness.register('chain_followers', async () => {
      const statuses = this.followers.map((f) => f.status());
      const halted = statuses.flatMap((s) => s.halted ?? []);
      const stalled = statuses.flatMap((s) => s.stalled ?? []);
      if (halted.length > 0) throw new Error([...halted, ...stalled].join('; '));
      return stalled.join('; ');
    });
  }

  onApplicationBootstrap(): void {
    for (const follower of this.followers) follower.start();
  }

  async onModuleDestroy(): Promise<void> {
    untrackFollowers(this.followers);
    await Promise.all(this.followers.map((f) => f.stop()));
    for (const client of this.clients) client.close();
  }

  status(): FollowerStatus[] {
    return this.followers.map((f) => f.status());
  }
}

/**
 * The indexer service: chain followers that turn blocks into chain observation events (stream `chain-<caip2>`,
 * topic `indexer.chain-observation.v1`). With no chain configured it boots, reports ready and idles.
 */
@Module({})
export class IndexerServiceModule {
  static forRoot(config: IndexerConfig): DynamicModule {
    return {
      module: IndexerServiceModule,
      controllers: [WatchCommandsHandler],
      providers: [{ provide: INDEXER_CONFIG, useValue: config }, ChainFollowers, IndexerWatchList],
      exports: [IndexerWatchList, ChainFollowers],
    };
  }
}

/** The service definition; configuration comes from the environment unless given (validated here, at start). */
export function indexerService(config: IndexerConfig = indexerConfigFromEnv(process.env)): ServiceDefinition {
  return {
    name: 'indexer',
    imports: [IndexerServiceModule.forRoot(config)],
    migrations: INDEXER_MIGRATIONS,
    // Other services ask it to watch addresses and contracts (INDEXER_COMMANDS, @stablepay/chain-operator).
    handlesCommands: true,
  };
}
