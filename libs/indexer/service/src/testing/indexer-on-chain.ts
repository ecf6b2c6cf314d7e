import { startService, type RunningService } from '@stablepay/runtime';
import type { Clock } from '@stablepay/util';
import { indexerService } from '../indexer.module';

/**
 * The indexer service as it runs (migrations, PostgreSQL event store, store-log bus, readiness) following one chain
 * from its head with no confirmations, on 127.0.0.1 and a free port. For the service's own tests.
 */
export function startIndexerOnChain(options: {
  readonly databaseUrl: string;
  readonly chain: { readonly caip2: string; readonly chainId: number; readonly rpcUrl: string };
  readonly pollMs: number;
  readonly stalledAfterMs?: number;
  readonly clock?: Clock;
}): Promise<RunningService> {
  const { chain } = options;
  return startService(
    {
      databaseUrl: options.databaseUrl,
      eventStore: 'postgres',
      eventBus: 'store-log',
      port: 0,
      host: '127.0.0.1',
      logLevel: 'error',
    },
    [
      indexerService({
        chains: [
          {
            caip2: chain.caip2,
            chainId: BigInt(chain.chainId),
            rpcUrl: chain.rpcUrl,
            confirmations: 0,
            startBlock: 'latest',
          },
        ],
        pollMs: options.pollMs,
        batchBlocks: 100,
        reorgWindow: 64,
        ...(options.stalledAfterMs !== undefined ? { stalledAfterMs: options.stalledAfterMs } : {}),
      }),
    ],
    { service: 'indexer', ...(options.clock ? { clock: options.clock } : {}) },
  );
}
