import { Gauge, register } from 'prom-client';
import type { ChainFollower } from './chain-follower';

/** Followers of every indexer module of this process (tests and the embedded run host several applications). */
const active = new Set<ChainFollower>();

/**
 * Follower gauges on prom-client's default registry (served by `/metrics`): where each chain's follower stands and
 * whether it halted. Get-or-create, since several applications in one process share the registry.
 */
function ensureGauges(): void {
  if (!register.getSingleMetric('stablepay_indexer_checkpoint_block')) {
    new Gauge({
      name: 'stablepay_indexer_checkpoint_block',
      help: 'Last block a chain follower ingested (-1 before its first step).',
      labelNames: ['chain'],
      collect() {
        this.reset();
        for (const f of active) this.set({ chain: f.chain }, f.status().checkpoint ?? -1);
      },
    });
  }
  if (!register.getSingleMetric('stablepay_indexer_follower_halted')) {
    new Gauge({
      name: 'stablepay_indexer_follower_halted',
      help: '1 when a chain follower halted and needs an operator (wrong chain, reorg deeper than the window).',
      labelNames: ['chain'],
      collect() {
        this.reset();
        for (const f of active) this.set({ chain: f.chain }, f.status().halted === null ? 0 : 1);
      },
    });
  }
}

export function trackFollowers(followers: readonly ChainFollower[]): void {
  ensureGauges();
  for (const f of followers) active.add(f);
}

export function untrackFollowers(followers: readonly ChainFollower[]): void {
  for (const f of followers) active.delete(f);
}
