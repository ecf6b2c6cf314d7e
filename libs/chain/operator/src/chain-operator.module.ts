import { type DynamicModule, Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { RelayerSet } from '@stablepay/relayer';
import type { ChainOperatorConfig } from './chain-operator.config';
import { IndexerWatchClient } from './indexer-watch.commands';

export const CHAIN_OPERATOR_CONFIG = Symbol('CHAIN_OPERATOR_CONFIG');

/** Relayer defaults for real chains; local chains (anvil mines at once) are served by the same values. */
const RECEIPT_TIMEOUT_MS = 180_000;

/**
 * One RelayerSet per process (the operator key's nonces are managed in it: two sets on one key would race each
 * other's nonces). Empty when chains are disabled.
 */
@Injectable()
export class OperatorRelayers implements OnApplicationShutdown {
  readonly set: RelayerSet | null;

  constructor(@Inject(CHAIN_OPERATOR_CONFIG) config: ChainOperatorConfig) {
    this.set =
      config.enabled && config.operator
        ? new RelayerSet(config.chains, {
            privateKey: config.operator.privateKey,
            receiptTimeoutMs: RECEIPT_TIMEOUT_MS,
          })
        : null;
  }

  /** The relayer set; throws when chains are disabled (callers check `config.enabled` first). */
  require(): RelayerSet {
    if (!this.set) throw new Error('no chain is configured (CHAIN_RPC_URLS): the operator relayers are off');
    return this.set;
  }

  /**
   * Last of the shutdown hooks: the workers that act on chain (deposit worker, sweeps, registrations) finish their
   * pass in `beforeApplicationShutdown`, which Nest runs after `onModuleDestroy`; destroyed earlier, their
   * providers failed mid-pass and every stop logged errors.
   */
  onApplicationShutdown(): void {
    this.set?.destroy();
  }
}

const modules = new WeakMap<ChainOperatorConfig, DynamicModule>();

/**
 * The chain configuration and the operator's relayers for any service that acts on chain (payments,
 * subscriptions): inject `CHAIN_OPERATOR_CONFIG` (chains, accepted stablecoins, confirmations, contract addresses,
 * the operator address) and `OperatorRelayers`; `IndexerWatchClient` asks the indexer to watch an address or a
 * contract (over the command transport). Global, and one module per config object: several services of one
 * process importing `forRoot(sameConfig)` share one RelayerSet.
 */
@Module({})
export class ChainOperatorModule {
  static forRoot(config: ChainOperatorConfig): DynamicModule {
    const existing = modules.get(config);
    if (existing) return existing;
    const module: DynamicModule = {
      module: ChainOperatorModule,
      global: true,
      providers: [{ provide: CHAIN_OPERATOR_CONFIG, useValue: config }, OperatorRelayers, IndexerWatchClient],
      exports: [CHAIN_OPERATOR_CONFIG, OperatorRelayers, IndexerWatchClient],
    };
    modules.set(config, module);
    return module;
  }
}
