import type { ObservedManagerLog } from './chain-facts';
import { SubscriptionReceiptChecks } from './receipt-checks';

const CHAIN = 'eip155:31337';
const RECEIPT_BLOCK = `0x${'aa'.repeat(32)}`;
const OTHER_BLOCK = `0x${'bb'.repeat(32)}`;
const TX = `0x${'cc'.repeat(32)}`;

const open: ObservedManagerLog = {
  observation_id: `receipt:${CHAIN}:${TX}:0:${RECEIPT_BLOCK}`,
  chain: CHAIN,
  contract: '0x1111111111111111111111111111111111111111',
  event: 'SubscriptionCharged',
  subscription_id: `0x${'dd'.repeat(32)}`,
  tx_hash: TX,
  args: {},
  retracted_at: null,
  block_number: '120',
  block_hash: RECEIPT_BLOCK,
  written_by: 'api',
  remembered_at: new Date('2026-11-24T14:00:00Z'),
} as ObservedManagerLog;

/** One pass over the open receipt against a node that answers `blockAt(120)` and no receipt for the transaction. */
async function checkAgainst(blockAt: (n: number) => { hash: string } | null) {
  const retracted: string[] = [];
  const checks = new SubscriptionReceiptChecks(
    {
      openReceipts: async (_limit: number, after?: unknown) => (after ? [] : [open]),
      indexerSaw: async () => false,
      markSettled: async () => undefined,
      markRetracted: async (id: string) => void retracted.push(id),
    } as never,
    { retract: async () => null } as never,
    { findByAddress: async () => ({ mode: 'test' }) } as never,
    {
      provider: () => ({
        getBlock: async (n: number) => blockAt(n),
        getTransactionReceipt: async () => null,
      }),
    } as never,
    { now: () => new Date('2026-11-24T14:00:05Z') } as never,
  );
  await checks.tick();
  return retracted;
}

describe('SubscriptionReceiptChecks: what is a reorg', () => {
  it('undoes the fact when the block at that height is another one and the transaction is not on the new fork', async () => {
    expect(await checkAgainst(() => ({ hash: OTHER_BLOCK }))).toEqual([open.observation_id]);
  });

  it('keeps the fact while the node answers no block at that height (a lagging or load-balanced node is no reorg)', async () => {
    expect(await checkAgainst(() => null)).toEqual([]);
  });
});
