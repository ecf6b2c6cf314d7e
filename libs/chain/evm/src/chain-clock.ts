import { blockAtOrBefore, type BlockTimeProvider } from './log-range';

/**
 * How far the service's clock may run ahead of a chain's block times. A block's timestamp has whole seconds and is
 * its producer's clock (a node's skew; a sequencer may stamp a block behind the time it makes it), so a block mined
 * after something the service dated (a payout's creation, a settlement address change) can carry an earlier time.
 * Used wherever the service's time and a block time are compared; generous, since each use only widens a bound.
 */
export const CHAIN_CLOCK_LAG_SECONDS = 3_600;

/**
 * The last block mined CHAIN_CLOCK_LAG_SECONDS before `at` (a time the service stamped on a record): the first block
 * a log lookup or an address watch needs for what cannot be on chain before that record existed (a transfer to the
 * deposit address it made, a sweep naming it), however long ago, with the margin for a chain clock behind ours.
 */
export function blockMinedBefore(provider: BlockTimeProvider, at: string): Promise<number> {
  return blockAtOrBefore(provider, Math.floor(Date.parse(at) / 1000) - CHAIN_CLOCK_LAG_SECONDS);
}
