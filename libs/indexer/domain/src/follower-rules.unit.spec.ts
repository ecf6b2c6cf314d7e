import {
  findForkPoint,
  followerStallReason,
  nextCatchUpChunk,
  nextRange,
  planNewObservations,
} from './follower-rules';
import { chainStreamId, observationKey, retractionKey } from './observation-events';

const H = (n: number, fork = 'a'): string => `0x${fork}${n.toString(16).padStart(63, '0')}`;

describe('nextRange', () => {
  it('reads nothing until a block has `confirmations` blocks on top of it', () => {
    expect(nextRange(9, 12, 3, 100)).toBeNull(); // target 9: already ingested
    expect(nextRange(9, 13, 3, 100)).toEqual({ from: 10, to: 10 });
  });

  it('reads the head itself with 0 confirmations, from block 0 on a fresh chain', () => {
    expect(nextRange(-1, 0, 0, 100)).toEqual({ from: 0, to: 0 });
  });

  it('caps a range at batchBlocks', () => {
    expect(nextRange(99, 1_000, 2, 200)).toEqual({ from: 100, to: 299 });
  });

  it('reads nothing when the head went below the checkpoint (a shorter fork)', () => {
    expect(nextRange(50, 40, 0, 10)).toBeNull();
  });
});

describe('followerStallReason', () => {
  const base = { lastPollAt: 1_000_000, lastAnswerAt: 1_000_000, lastError: null, stalledAfterMs: 30_000 };

  it('is null while the last completed step is younger than the threshold', () => {
    expect(followerStallReason('eip155:137', { ...base, now: 1_029_999 })).toBeNull();
  });

  it('names a node that answered nothing for the threshold, in whole seconds', () => {
    expect(followerStallReason('eip155:137', { ...base, now: 1_041_500 })).toBe(
      'eip155:137 RPC unanswered for 41 s',
    );
    expect(
      followerStallReason('eip155:137', {
        ...base,
        lastAnswerAt: null,
        lastError: 'timeout',
        now: 1_030_000,
      }),
    ).toBe('eip155:137 RPC unanswered for 30 s (last error: timeout)');
  });

  it('tells a node that answers while steps still fail from a silent one', () => {
    expect(
      followerStallReason('eip155:137', {
        ...base,
        lastAnswerAt: 1_035_000,
        lastError: 'database unreachable',
        now: 1_040_000,
      }),
    ).toBe('eip155:137 no successful poll for 40 s: database unreachable');
  });
});

describe('findForkPoint', () => {
  const stored = [
    { number: 10, hash: H(10) },
    { number: 12, hash: H(12) },
    { number: 15, hash: H(15) },
  ];

  it('is the highest stored block still canonical', () => {
    const canonical = new Map([
      [10, H(10)],
      [12, H(12)],
      [15, H(15, 'b')],
    ]);
    expect(findForkPoint(stored, canonical)).toEqual({ number: 12, hash: H(12) });
  });

  it('compares hashes case-insensitively and treats a missing height as orphaned', () => {
    const canonical = new Map<number, string | null>([
      [10, H(10).toUpperCase().replace('0X', '0x')],
      [12, null],
    ]);
    expect(findForkPoint(stored, canonical)).toEqual({ number: 10, hash: H(10) });
  });

  it('is null when the fork is deeper than every stored block', () => {
    expect(findForkPoint(stored, new Map([[10, H(10, 'b')]]))).toBeNull();
  });
});

describe('planNewObservations', () => {
  const log = (tx: string, logIndex: number, blockHash = H(1)) => ({ txHash: tx, logIndex, blockHash });

  it('publishes a log once: a live observation of the same log in the same block is skipped', () => {
    const planned = planNewObservations(
      [log('0x01', 0), log('0x01', 1)],
      [{ ...log('0x01', 0), retracted: false }],
    );
    expect(planned).toEqual([{ candidate: log('0x01', 1), occurrence: 0 }]);
  });

  it('skips a log listed twice among the candidates', () => {
    expect(planNewObservations([log('0x01', 0), log('0x01', 0)], [])).toHaveLength(1);
  });

  it('re-publishes a retracted log from the same block with the next occurrence number', () => {
    const planned = planNewObservations([log('0x01', 0)], [{ ...log('0x01', 0), retracted: true }]);
    expect(planned).toEqual([{ candidate: log('0x01', 0), occurrence: 1 }]);
  });

  it('treats the same log in another block as a new observation', () => {
    const planned = planNewObservations(
      [log('0x01', 0, H(1, 'b'))],
      [{ ...log('0x01', 0), retracted: true }],
    );
    expect(planned).toEqual([{ candidate: log('0x01', 0, H(1, 'b')), occurrence: 0 }]);
  });
});

describe('nextCatchUpChunk', () => {
  it('starts at the lowest lagging cursor and scans each watch from its own cursor', () => {
    const chunk = nextCatchUpChunk(
      [
        { address: 'A', scannedThrough: 9 },
        { address: 'B', scannedThrough: 14 },
        { address: 'C', scannedThrough: 40 },
      ],
      50,
      10,
    );
    expect(chunk).toEqual({
      from: 10,
      to: 19,
      watches: [
        { address: 'A', from: 10 },
        { address: 'B', from: 15 },
      ],
    });
  });

  it('never passes the checkpoint and is null once every watch has caught up', () => {
    expect(nextCatchUpChunk([{ address: 'A', scannedThrough: 45 }], 50, 100)).toEqual({
      from: 46,
      to: 50,
      watches: [{ address: 'A', from: 46 }],
    });
    expect(nextCatchUpChunk([{ address: 'A', scannedThrough: 50 }], 50, 100)).toBeNull();
  });

  it('scans from block 0 for a watch that wants the whole history', () => {
    expect(nextCatchUpChunk([{ address: 'A', scannedThrough: -1 }], 3, 100)).toEqual({
      from: 0,
      to: 3,
      watches: [{ address: 'A', from: 0 }],
    });
  });
});

describe('observation identity', () => {
  it('names the chain stream by CAIP-2 id, in the chain category', () => {
    expect(chainStreamId('eip155:8453')).toBe('chain-eip155:8453');
  });

  it('keys an observation by chain, tx hash, log index and block hash, case-insensitively', () => {
    expect(observationKey('eip155:1', '0xAB', 3, '0xCD')).toBe('obs:eip155:1:0xab:3:0xcd');
    expect(observationKey('eip155:1', '0xab', 3, '0xcd', 2)).toBe('obs:eip155:1:0xab:3:0xcd#2');
    expect(retractionKey('e1')).toBe('retract:e1');
  });
});
