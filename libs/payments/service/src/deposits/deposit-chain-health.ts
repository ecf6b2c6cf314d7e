import { scrapedGauge } from '@stablepay/http';
import type { Clock } from '@stablepay/util';

/**
 * A chain whose head the deposit worker has not read for this long is reported (/ready degraded, gauge): its
 * deposits wait unconfirmed. Reads run every 500 ms with a 10 s deadline, so this is three abandoned reads in a row.
 */
export const DEPOSIT_CHAIN_STALLED_AFTER_MS = 30_000;

export interface DepositChainStatus {
  readonly chain: string;
  /** The head the chain's node last reported to the worker (null before its first answer). */
  readonly head: number | null;
  /** Since the last head read that answered, or since the worker started before the first one. */
  readonly secondsSinceHead: number;
  /** Why the chain counts as stalled, or null. */
  readonly stalled: string | null;
}

/**
 * Per chain, when the deposit worker last read its head (by the injected clock) and why its reads fail since. A node
 * that hangs fails nothing until the read's deadline and then hangs the next one: counting failures shows it late
 * or never, time without an answer shows it.
 */
export class DepositChainHealth {
  private readonly chains = new Map<
    string,
    { answeredAt: number; head: number | null; error: string | null }
  >();

  constructor(
    chains: readonly string[],
    private readonly clock: Clock,
    private readonly stalledAfterMs = DEPOSIT_CHAIN_STALLED_AFTER_MS,
  ) {
    const now = clock.now().getTime();
    for (const chain of chains) this.chains.set(chain, { answeredAt: now, head: null, error: null });
  }

  answered(chain: string, head: number): void {
    this.chains.set(chain, { answeredAt: this.clock.now().getTime(), head, error: null });
  }

  failed(chain: string, error: unknown): void {
    const entry = this.chains.get(chain);
    if (entry) entry.error = error instanceof Error ? error.message : String(error);
  }

  status(): DepositChainStatus[] {
    const now = this.clock.now().getTime();
    return [...this.chains].map(([chain, { answeredAt, head, error }]) => {
      const silentMs = Math.max(0, now - answeredAt);
      const seconds = Math.floor(silentMs / 1000);
      return {
        chain,
        head,
        secondsSinceHead: silentMs / 1000,
        stalled:
          silentMs < this.stalledAfterMs
            ? null
            : `${chain} RPC unanswered for ${seconds} s${error ? ` (last error: ${error})` : ''}`,
      };
    });
  }
}

/** The deposit workers of this process (tests and the embedded run host several applications on one registry). */
const active = new Set<DepositChainHealth>();

function depositChainGauge(name: string, help: string, value: (s: DepositChainStatus) => number): void {
  scrapedGauge(name, help, ['chain'], function* () {
    for (const health of active)
      for (const s of health.status()) yield [{ chain: s.chain }, value(s)] as const;
  });
}

/** Serves the worker's per-chain gauges on /metrics until `untrack`. */
export function trackDepositChains(health: DepositChainHealth): void {
  depositChainGauge(
    'stablepay_payment_deposit_chain_head_block',
    "The chain head the deposit worker's last answered read returned (-1 before the first answer).",
    (s) => s.head ?? -1,
  );
  depositChainGauge(
    'stablepay_payment_deposit_seconds_since_chain_head',
    "Seconds since the deposit worker last read the chain's head (since its start before the first read).",
    (s) => s.secondsSinceHead,
  );
  active.add(health);
}

export function untrackDepositChains(health: DepositChainHealth): void {
  active.delete(health);
}
