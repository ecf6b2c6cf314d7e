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

const WINDOW_MS = 600_000;
const NOW = new Date('2026-11-24T14:00:05Z');
const NEW_FORK_BLOCK = `0x${'ee'.repeat(32)}`;

interface Node {
  /** The block the node holds at a height (null: none yet). */
  readonly blockAt: (n: number) => { hash: string } | null;
  readonly receipt?: { status: number; blockNumber: number; blockHash: string } | null;
  /** What eth_getTransactionByHash answers (null: unknown to the node, dropped). */
  readonly transaction?: { blockNumber: number | null } | null;
}

/** One pass over the open receipt (`row`) against `node`, at `now`: what it retracted, followed and marked pending. */
async function checkAgainst(node: Node, row: ObservedManagerLog = open, now = NOW) {
  const retracted: string[] = [];
  const followed: unknown[] = [];
  const pending: unknown[] = [];
  const checks = new SubscriptionReceiptChecks(
    {
      openReceipts: async (_limit: number, after?: unknown) => (after ? [] : [row]),
      settleSeenByIndexer: async () => 0,
      indexerSaw: async () => false,
      markSettled: async () => undefined,
      markRetracted: async (id: string) => void retracted.push(id),
      followReceipt: async (...args: unknown[]) => void followed.push(args),
      markPending: async (...args: unknown[]) => void pending.push(args),
    } as never,
    { retract: async () => null } as never,
    { findByAddress: async () => ({ mode: 'test' }) } as never,
    {
      provider: () => ({
        getBlock: async (n: number) => node.blockAt(n),
        getTransactionReceipt: async () => node.receipt ?? null,
        getTransaction: async () => node.transaction ?? null,
      }),
    } as never,
    { now: () => now } as never,
    { receiptReinclusionWindowMs: WINDOW_MS },
  );
  await checks.tick();
  return { retracted, followed, pending };
}

const replaced = (n: number) => (n === 120 ? { hash: OTHER_BLOCK } : { hash: NEW_FORK_BLOCK });

describe('SubscriptionReceiptChecks: what is a reorg', () => {
  it('undoes the fact when the block at that height is another one and the node knows no such transaction (dropped)', async () => {
    expect((await checkAgainst({ blockAt: replaced })).retracted).toEqual([open.observation_id]);
  });

  it('undoes the fact at once when the transaction reverted on the new fork', async () => {
    const receipt = { status: 0, blockNumber: 121, blockHash: NEW_FORK_BLOCK };
    expect((await checkAgainst({ blockAt: replaced, receipt })).retracted).toEqual([open.observation_id]);
  });

  it('keeps the fact while the node answers no block at that height (a lagging or load-balanced node is no reorg)', async () => {
    expect(await checkAgainst({ blockAt: () => null })).toEqual({ retracted: [], followed: [], pending: [] });
  });

  it('keeps the fact while the node answers no block at the height of the re-inclusion it reports', async () => {
    const receipt = { status: 1, blockNumber: 125, blockHash: NEW_FORK_BLOCK };
    const node = { blockAt: (n: number) => (n === 120 ? { hash: OTHER_BLOCK } : null), receipt };
    expect(await checkAgainst(node)).toEqual({ retracted: [], followed: [], pending: [] });
  });
});

describe('SubscriptionReceiptChecks: a transaction of the orphaned block back in the pool', () => {
  it('keeps the fact while the node holds the transaction pending, and remembers since when', async () => {
    const checked = await checkAgainst({ blockAt: replaced, transaction: { blockNumber: null } });
    expect(checked).toEqual({ retracted: [], followed: [], pending: [[open.observation_id, NOW]] });
  });

  it('keeps the fact while pending within RECEIPT_REINCLUSION_WINDOW_SECONDS of the first pass that found it so', async () => {
    const since = new Date(NOW.getTime() - WINDOW_MS + 1);
    const checked = await checkAgainst(
      { blockAt: replaced, transaction: { blockNumber: null } },
      { ...open, pending_since: since },
    );
    expect(checked).toEqual({ retracted: [], followed: [], pending: [] });
  });

  it('undoes the fact once the transaction is still pending after the window', async () => {
    const since = new Date(NOW.getTime() - WINDOW_MS);
    const checked = await checkAgainst(
      { blockAt: replaced, transaction: { blockNumber: null } },
      { ...open, pending_since: since },
    );
    expect(checked.retracted).toEqual([open.observation_id]);
  });

  it('undoes the fact once the pending transaction is dropped, within the window', async () => {
    const checked = await checkAgainst({ blockAt: replaced }, { ...open, pending_since: NOW });
    expect(checked.retracted).toEqual([open.observation_id]);
  });

  it('follows the transaction mined again in another canonical block: the row moves there, still open', async () => {
    const receipt = { status: 1, blockNumber: 123, blockHash: NEW_FORK_BLOCK };
    const checked = await checkAgainst({ blockAt: replaced, receipt }, { ...open, pending_since: NOW });
    expect(checked).toEqual({
      retracted: [],
      followed: [[open.observation_id, 123, NEW_FORK_BLOCK]],
      pending: [],
    });
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
      { now: () => NOW } as never,
      { receiptReinclusionWindowMs: WINDOW_MS },
    );
    await checks.tick();
    expect(calls).toEqual({ settle: 1, indexerSaw: 0, findByAddress: 1, getBlock: 1 });
  });
});
