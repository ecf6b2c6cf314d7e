import { Inject, Injectable, Logger, type OnModuleDestroy, Optional } from '@nestjs/common';
import { OperatorRelayers as SharedOperatorRelayers, assertChainModeServed } from '@stablepay/chain-operator';
import { JsonRpcProvider } from 'ethers';
import type { ChainInfo } from '@stablepay/evm';
import { isDependencyOutage } from '@stablepay/event-bus';
import { ChainRelayer } from '@stablepay/relayer';
import { type Clock, DomainError } from '@stablepay/util';
import { CLOCK } from '@stablepay/aggregate';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';

export type Mode = 'test' | 'live';

export function chainUnavailable(message: string): DomainError {
  return new DomainError({ type: 'api_error', status: 503, code: 'chain_unavailable', message });
}

const outages = new Logger('chain-access');

/**
 * `call` to `chain`'s node, a node that did not answer (refused, reset, timed out, 5xx) answered as 503
 * chain_unavailable: the caller retries, as with every other chain outage here, instead of getting a 500 that reads
 * as our bug. Only the call's own promise is judged, so a database outage beside it is not named a chain's. The cause
 * stays in the log: an RPC error can carry the node's URL, and with it a provider key.
 */
export function fromChain<T>(chain: string, call: Promise<T>): Promise<T> {
  return call.catch((error: unknown) => {
    if (!isDependencyOutage(error)) throw error;
    outages.warn({ msg: 'chain node did not answer', chain, error: String(error) });
    throw chainUnavailable(`The ${chain} node did not answer; retry shortly.`);
  });
}

/** How long a read reuses the latest block time it fetched (reads must not cost one RPC call each). */
const CHAIN_TIME_TTL_MS = 1000;

/**
 * Read access to the chains a merchant's mode offers: an ethers provider per RPC URL and the chain's time (the latest
 * block's timestamp), which the subscription window arithmetic runs on (cap and budget rule 3: chain time, never the
 * service clock). A chain without an RPC URL falls back to the service clock.
 */
@Injectable()
export class ChainTime implements OnModuleDestroy {
  private readonly providers = new Map<string, JsonRpcProvider>();
  private readonly cached = new Map<string, { at: number; seconds: bigint }>();

  constructor(
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  chain(mode: Mode, caip2: string): ChainInfo | undefined {
    return this.config.chains[mode].find(caip2);
  }

  provider(mode: Mode, caip2: string): JsonRpcProvider | null {
    const chain = this.chain(mode, caip2);
    if (!chain?.rpcUrl) return null;
    let provider = this.providers.get(chain.rpcUrl);
    if (!provider) {
      provider = new JsonRpcProvider(chain.rpcUrl, chain.chainId, {
        staticNetwork: true,
        cacheTimeout: -1,
        pollingInterval: 100,
        // No 10 ms batching stall: chain time is read on every charge's path.
        batchStallTime: 0,
      });
      this.providers.set(chain.rpcUrl, provider);
    }
    return provider;
  }

  /** Unix seconds of the chain's latest block (the service clock when the chain cannot be asked). */
  async now(mode: Mode, caip2: string): Promise<bigint> {
    const key = `${mode}|${caip2}`;
    const hit = this.cached.get(key);
    const wall = Date.now();
    if (hit && wall - hit.at < CHAIN_TIME_TTL_MS) return hit.seconds;
    const provider = this.provider(mode, caip2);
    let seconds = BigInt(Math.floor(this.clock.now().getTime() / 1000));
    if (provider) {
      try {
        const block = await provider.getBlock('latest');
        if (block) seconds = BigInt(block.timestamp);
      } catch {
        // An unreachable node: the service clock is the best estimate (reads must not fail for it).
      }
    }
    this.cached.set(key, { at: wall, seconds });
    return seconds;
  }

  /** Forget cached chain times (after our own transaction moved a chain on). */
  invalidate(mode: Mode, caip2: string): void {
    this.cached.delete(`${mode}|${caip2}`);
  }

  onModuleDestroy(): void {
    for (const provider of this.providers.values()) provider.destroy();
  }
}

/**
 * The operator's relayer per chain (the hot key of OPERATOR_PRIVATE_KEY): deploys managers, submits merchant-signed
 * cancels, and is the wallet that signs SubscribeAuthorizations. With the shared chain layer in the process
 * (ChainOperatorModule, subscriptionsService(config, chainOperator)) its RelayerSet is used, so the operator key has
 * one nonce sequence per process; otherwise a relayer per chain is created on first use.
 */
@Injectable()
export class OperatorRelayers implements OnModuleDestroy {
  private readonly relayers = new Map<string, ChainRelayer>();

  constructor(
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
    @Optional() @Inject(SharedOperatorRelayers) private readonly shared?: SharedOperatorRelayers,
  ) {}

  get operatorKey(): string {
    if (!this.config.operatorPrivateKey)
      throw chainUnavailable('The service has no operator key configured (OPERATOR_PRIVATE_KEY).');
    return this.config.operatorPrivateKey;
  }

  for(mode: Mode, caip2: string): ChainRelayer {
    // The one way the operator key reaches a chain here (deploy, register, charge, cancel): never for a merchant
    // of the other mode, whose registry resolves to this deployment's chains by the same chain ids.
    assertChainModeServed(this.config.chainMode, mode);
    const chain = this.config.chains[mode].find(caip2);
    if (!chain?.rpcUrl) throw chainUnavailable(`No RPC endpoint is configured for ${caip2}.`);
    const shared = this.shared?.set;
    if (shared?.chains().includes(caip2)) return shared.for(caip2);
    const key = `${mode}|${caip2}`;
    let relayer = this.relayers.get(key);
    if (!relayer) {
      relayer = new ChainRelayer({
        chainId: chain.chainId,
        rpcUrl: chain.rpcUrl,
        privateKey: this.operatorKey,
        receiptTimeoutMs: 60_000,
      });
      this.relayers.set(key, relayer);
    }
    return relayer;
  }

  onModuleDestroy(): void {
    for (const relayer of this.relayers.values()) relayer.destroy();
  }
}
