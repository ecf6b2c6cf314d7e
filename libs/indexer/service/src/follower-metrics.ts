import { scrapedGauge } from '@stablepay/http';
import type { ChainFollower, FollowerStatus } from './chain-follower';

/** Followers of every indexer module of this process (tests and the embedded run host several applications). */
const active = new Set<ChainFollower>();

/** A gauge per followed chain, computed from the live followers at each scrape; null leaves the chain out. */
function followerGauge(name: string, help: string, value: (status: FollowerStatus) => number | null): void {
  scrapedGauge(name, help, ['chain'], function* () {
    for (const f of active) {
      const v = value(f.status());
      if (v !== null) yield [{ chain: f.chain }, v] as const;
    }
  });
}

/**
 * Follower gauges on prom-client's default registry (served by `/metrics`): where each chain's follower stands, the
 * head its node reported, how long since its last successful poll, and whether it halted.
 */
function ensureGauges(): void {
  followerGauge(
    'stablepay_indexer_checkpoint_block',
    'Last block a chain follower ingested (-1 before its first step).',
    (s) => s.checkpoint ?? -1,
  );
  followerGauge(
    'stablepay_indexer_head_block',
    "The chain head a follower's node last reported (-1 before its first answer).",
    (s) => s.head ?? -1,
  );
  followerGauge(
    'stablepay_indexer_seconds_since_last_poll',
    'Seconds since a chain follower last completed a poll (or started); grows while its node hangs or fails. Followers not running are left out.',
    (s) => s.secondsSinceLastPoll,
  );
  followerGauge(
    'stablepay_indexer_follower_halted',
    '1 when a chain follower halted and needs an operator (wrong chain, reorg deeper than the window).',
    (s) => (s.halted === null ? 0 : 1),
  );
}

export function trackFollowers(followers: readonly ChainFollower[]): void {
  ensureGauges();
  for (const f of followers) active.add(f);
}

export function untrackFollowers(followers: readonly ChainFollower[]): void {
  for (const f of followers) active.delete(f);
}
