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
      settleSeenByIndexer: async () => 0,
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

describe('SubscriptionReceiptChecks: what one pass costs', () => {
  it('receipts of one block and one manager still canonical cost one manager lookup, one block read and no per-receipt query', async () => {
    const rows = [1, 2, 3].map((i) => ({
      ...open,
      observation_id: `receipt:${CHAIN}:0x${String(i).repeat(64)}:0:${RECEIPT_BLOCK}`,
      tx_hash: `0x${String(i).repeat(64)}`,
    }));
    const calls = { settle: 0, indexerSaw: 0, findByAddress: 0, getBlock: 0 };
    const checks = new SubscriptionReceiptChecks(
      {
        openReceipts: async (_limit: number, after?: unknown) => (after ? [] : rows),
        settleSeenByIndexer: async () => {
          calls.settle++;
          return 0;
        },
        indexerSaw: async () => {
          calls.indexerSaw++;
          return false;
        },
        markSettled: async () => undefined,
        markRetracted: async () => undefined,
      } as never,
      { retract: async () => null } as never,
      {
        findByAddress: async () => {
          calls.findByAddress++;
          return { mode: 'test' };
        },
      } as never,
      {
        provider: () => ({
          getBlock: async () => {
            calls.getBlock++;
            return { hash: RECEIPT_BLOCK };
          },
          getTransactionReceipt: async () => null,
        }),
      } as never,
      { now: () => new Date('2026-11-24T14:00:05Z') } as never,
    );
    await checks.tick();
    expect(calls).toEqual({ settle: 1, indexerSaw: 0, findByAddress: 1, getBlock: 1 });
  });
});
