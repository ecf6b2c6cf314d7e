import { Interface, JsonRpcProvider, Wallet, id, parseEther, type InterfaceAbi } from 'ethers';
import { ANVIL_DEV_PRIVATE_KEYS, startAnvil, type AnvilNode } from '@stablepay/local-chains';
import {
  ChainRelayer,
  RelayerBroadcastError,
  type Broadcast,
  type RelayRequest,
  type RelayerOptions,
} from './relayer';
import { RelayerSet } from './relayer-set';
import { compileRelayerTestTarget, deployRelayerTestTarget } from './testing/relayer-test-target';

const CHAIN_ID = 8453;

function devKey(index: number): string {
  const key = ANVIL_DEV_PRIVATE_KEYS[index];
  if (key === undefined) throw new Error(`no anvil dev key ${index}`);
  return key;
}

describe('ChainRelayer on anvil', () => {
  let node: AnvilNode;
  let admin: JsonRpcProvider;
  let target: string;
  let abi: Interface;
  const relayers: ChainRelayer[] = [];

  const newRelayer = (key: number | string, options: Partial<RelayerOptions> = {}): ChainRelayer => {
    const privateKey = typeof key === 'number' ? devKey(key) : key;
    const relayer = new ChainRelayer({ chainId: CHAIN_ID, rpcUrl: node.rpcUrl, privateKey, ...options });
    relayers.push(relayer);
    return relayer;
  };
  const request = (
    method: string,
    args: readonly unknown[] = [],
    extra: Partial<RelayRequest> = {},
  ): RelayRequest => ({
    to: target,
    data: abi.encodeFunctionData(method, args),
    abi,
    ...extra,
  });
  const count = async (): Promise<bigint> =>
    BigInt(await admin.call({ to: target, data: abi.encodeFunctionData('count') }));
  const withoutAutomine = async (body: () => Promise<void>): Promise<void> => {
    await admin.send('evm_setAutomine', [false]);
    try {
      await body();
    } finally {
      await admin.send('evm_setAutomine', [true]);
    }
  };

  /** A ping mined, then taken out by a reorg (evm_revert) that does not put it back in the pool. */
  const pingRevertedAway = async (relayer: ChainRelayer): Promise<{ nonce: number }> => {
    const snapshot = (await admin.send('evm_snapshot', [])) as string;
    const mined = await relayer.submit(request('ping'));
    if (mined.kind !== 'confirmed') throw new Error(`expected confirmed, got ${mined.kind}`);
    await admin.send('evm_revert', [snapshot]);
    return mined;
  };

  beforeAll(async () => {
    node = await startAnvil({ chainId: CHAIN_ID });
    admin = new JsonRpcProvider(node.rpcUrl, CHAIN_ID, {
      staticNetwork: true,
      cacheTimeout: -1,
      pollingInterval: 50,
    });
    const deployed = await deployRelayerTestTarget(new Wallet(devKey(9), admin), compileRelayerTestTarget());
    target = deployed.address;
    abi = deployed.iface;
  });

  afterEach(() => {
    for (const relayer of relayers.splice(0)) relayer.destroy();
  });

  afterAll(async () => {
    admin?.destroy();
    await node?.stop();
  });

  it('simulates, sends and returns the confirmed receipt with its fee', async () => {
    const relayer = newRelayer(0);
    const before = await count();

    const outcome = await relayer.submit(request('ping'));

    if (outcome.kind !== 'confirmed') throw new Error(`expected confirmed, got ${outcome.kind}`);
    expect(outcome.receipt.status).toBe(1);
    expect(outcome.fee).toBe(outcome.gasUsed * outcome.effectiveGasPrice);
    expect(outcome.fee).toBeGreaterThan(0n);
    expect(outcome.receipt.from).toBe(relayer.address);
    expect(await count()).toBe(before + 1n);
  });

  it('returns a simulation revert as the custom error name and its decoded args, without broadcasting', async () => {
    const relayer = newRelayer(1);
    const nonceBefore = await admin.getTransactionCount(relayer.address, 'pending');

    const outcome = await relayer.submit(request('charge', [1001n]));

    expect(outcome).toEqual({
      kind: 'simulation_rejected',
      errorName: 'ChargeAmountExceedsCap',
      args: [1001n, 1000n],
      selector: id('ChargeAmountExceedsCap(uint256,uint256)').slice(0, 10),
      data: expect.stringMatching(/^0x[0-9a-f]+$/),
    });
    expect(await admin.getTransactionCount(relayer.address, 'pending')).toBe(nonceBefore);
  });

  it('prepares without broadcasting, then sends what it prepared', async () => {
    const relayer = newRelayer(2);
    const nonceBefore = await admin.getTransactionCount(relayer.address, 'pending');
    const before = await count();

    const prepared = await relayer.prepare(request('ping'));
    if (prepared.kind !== 'prepared') throw new Error(`expected prepared, got ${prepared.kind}`);
    expect(prepared.gasLimit).toBeGreaterThan(0n);
    expect(await admin.getTransactionCount(relayer.address, 'pending')).toBe(nonceBefore);

    const outcome = await relayer.waitForReceipt(await relayer.sendPrepared(prepared));
    expect(outcome).toMatchObject({ kind: 'confirmed', nonce: nonceBefore });
    expect(await count()).toBe(before + 1n);
  });

  it('names a require-string revert Error with the reason as its argument', async () => {
    const outcome = await newRelayer(1).submit(request('failWithReason', [true]));
    expect(outcome).toMatchObject({
      kind: 'simulation_rejected',
      errorName: 'Error',
      args: ['plain reason'],
    });
  });

  it('reports a custom error missing from the supplied ABI as UnknownRevert with its selector', async () => {
    const partialAbi = new Interface(
      (JSON.parse(abi.formatJson()) as { type: string; name?: string }[]).filter(
        (f) => f.name !== 'NotInTheCallerAbi',
      ) as InterfaceAbi,
    );
    const outcome = await newRelayer(1).submit(request('failWithErrorOutsideAbi', [], { abi: partialAbi }));
    expect(outcome).toMatchObject({
      kind: 'simulation_rejected',
      errorName: 'UnknownRevert',
      args: [],
      selector: id('NotInTheCallerAbi(uint256)').slice(0, 10),
    });
  });

  it('lands 100 concurrent submissions with consecutive nonces and no gap', async () => {
    // Not dev key #2: its entry in ANVIL_DEV_PRIVATE_KEYS does not match anvil's account (reported to its owner).
    const relayer = newRelayer(0);
    const start = await admin.getTransactionCount(relayer.address, 'latest');
    const before = await count();

    const outcomes = await Promise.all(Array.from({ length: 100 }, () => relayer.submit(request('ping'))));

    const nonces = outcomes.map((o) => {
      if (o.kind !== 'confirmed') throw new Error(`expected confirmed, got ${o.kind}`);
      return o.nonce;
    });
    expect([...nonces].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => start + i));
    expect(await admin.getTransactionCount(relayer.address, 'latest')).toBe(start + 100);
    expect(await count()).toBe(before + 100n);
  });

  it('re-syncs its nonce from the chain after another sender used the same key', async () => {
    const relayer = newRelayer(3);
    const first = await relayer.submit(request('ping'));
    if (first.kind !== 'confirmed') throw new Error(`expected confirmed, got ${first.kind}`);
    // The same key used outside the relayer: its cached next nonce is now taken.
    const outsider = new Wallet(devKey(3), admin);
    await (
      await outsider.sendTransaction({ to: outsider.address, value: 1n, nonce: first.nonce + 1 })
    ).wait();

    const second = await relayer.submit(request('ping'));

    expect(second).toMatchObject({ kind: 'confirmed', nonce: first.nonce + 2 });
  });

  it('throws RelayerBroadcastError when the node refuses the transaction, and leaves no nonce gap', async () => {
    const broke = Wallet.createRandom();
    const relayer = newRelayer(broke.privateKey);

    await expect(relayer.submit(request('ping'))).rejects.toBeInstanceOf(RelayerBroadcastError);

    await (
      await new Wallet(devKey(9), admin).sendTransaction({ to: broke.address, value: parseEther('1') })
    ).wait();
    expect(await relayer.submit(request('ping'))).toMatchObject({ kind: 'confirmed', nonce: 0 });
  });

  it('reports a receipt that reverted on chain as a typed failure with the replayed error name', async () => {
    const relayer = newRelayer(4);
    await withoutAutomine(async () => {
      // Both simulate against the same unblocked state; in the mined block the first one blocks the second.
      const block = await relayer.send(request('setBlocked', [true]));
      const ping = await relayer.send(request('ping', [], { gasLimit: 200_000n }));
      if (block.kind !== 'broadcast' || ping.kind !== 'broadcast')
        throw new Error('expected both to be broadcast');
      await admin.send('evm_mine', []);

      expect(await relayer.waitForReceipt(block)).toMatchObject({ kind: 'confirmed' });
      const reverted = await relayer.waitForReceipt(ping);
      expect(reverted).toMatchObject({
        kind: 'reverted',
        nonce: block.nonce + 1,
        revert: { errorName: 'Blocked', args: [relayer.address] },
      });
      if (reverted.kind !== 'reverted') throw new Error('unreachable');
      expect(reverted.receipt.status).toBe(0);
      expect(reverted.fee).toBeGreaterThan(0n);
    });
    await relayer.submit(request('setBlocked', [false]));
  });

  it('waits for the requested number of confirmations', async () => {
    const relayer = newRelayer(5);
    let settled = false;
    const pending = relayer.submit(request('ping'), { confirmations: 3 }).finally(() => (settled = true));

    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(settled).toBe(false);
    await admin.send('anvil_mine', ['0x2']);
    const outcome = await pending;

    if (outcome.kind !== 'confirmed') throw new Error(`expected confirmed, got ${outcome.kind}`);
    expect(await admin.getBlockNumber()).toBeGreaterThanOrEqual(outcome.blockNumber + 2);
  });

  it('re-syncs its nonce after a receipt timeout: a transaction of its own the chain forgot (reverted away) leaves no gap behind it', async () => {
    const relayer = newRelayer(7);
    const first = await pingRevertedAway(relayer);

    // Its cached next nonce is now one above the chain's: the node queues the transaction and never mines it.
    const stuck = await relayer.submit(request('ping'), { timeoutMs: 500 });
    expect(stuck).toMatchObject({ kind: 'receipt_timeout', nonce: first.nonce + 1 });

    expect(await relayer.submit(request('ping'))).toMatchObject({ kind: 'confirmed', nonce: first.nonce });
  });

  // The receipt waits below outlast the test's own timeout: without healing the gap they would hang until it ends the
  // test (a ceiling, not a timed assertion).
  const UNTIL_TEST_TIMEOUT = { timeoutMs: 10 * 60_000 };

  it('heals the nonce gap a reorg leaves under its next send: a mined transaction reverted away is filled by a no-op and the send lands', async () => {
    const relayer = newRelayer(8);
    const first = await pingRevertedAway(relayer);
    const before = await count();

    // Its cached next nonce is one above the chain's; the node queues the send behind the gap and raises nothing.
    const second = await relayer.submit(request('ping'), UNTIL_TEST_TIMEOUT);

    expect(second).toMatchObject({ kind: 'confirmed', nonce: first.nonce + 1 });
    // The reverted-away ping was not sent again: its nonce went to a transfer to ourselves.
    expect(await count()).toBe(before + 1n);
    expect(await admin.getTransactionCount(relayer.address, 'latest')).toBe(first.nonce + 2);
  }, 60_000);

  it('re-sends the same signed transaction when the node drops an awaited one from its pool, and the one queued behind it lands too', async () => {
    const relayer = newRelayer(8, { nonceGapCheckMs: 200 });
    const before = await count();
    let dropped: Broadcast | undefined;
    let behind: Broadcast | undefined;
    await withoutAutomine(async () => {
      const a = await relayer.send(request('ping'));
      const b = await relayer.send(request('ping'));
      if (a.kind !== 'broadcast' || b.kind !== 'broadcast') throw new Error('expected two broadcasts');
      await admin.send('anvil_dropTransaction', [a.txHash]);
      await admin.send('evm_mine', []);
      expect(await admin.getTransactionCount(relayer.address, 'latest')).toBe(a.nonce);
      [dropped, behind] = [a, b];
    });
    if (dropped === undefined || behind === undefined) throw new Error('unreachable');

    const first = await relayer.waitForReceipt(dropped, UNTIL_TEST_TIMEOUT);
    expect(first).toMatchObject({ kind: 'confirmed', txHash: dropped.txHash, nonce: dropped.nonce });
    const second = await relayer.waitForReceipt(behind, UNTIL_TEST_TIMEOUT);
    expect(second).toMatchObject({ kind: 'confirmed', txHash: behind.txHash, nonce: behind.nonce });
    expect(await count()).toBe(before + 2n);
  }, 60_000);

  it('returns receipt_timeout when the transaction is not mined in time, and the receipt once it is', async () => {
    const relayer = newRelayer(6);
    await withoutAutomine(async () => {
      const sent = await relayer.send(request('ping'));
      if (sent.kind !== 'broadcast') throw new Error(`expected broadcast, got ${sent.kind}`);

      const timedOut = await relayer.waitForReceipt(sent, { timeoutMs: 300 });
      expect(timedOut).toEqual({
        kind: 'receipt_timeout',
        txHash: sent.txHash,
        nonce: sent.nonce,
        broadcast: sent,
      });
      if (timedOut.kind !== 'receipt_timeout') throw new Error('unreachable');
      await admin.send('evm_mine', []);
      expect(await relayer.waitForReceipt(timedOut.broadcast)).toMatchObject({
        kind: 'confirmed',
        txHash: sent.txHash,
      });
    });
  });

  it('refuses an RPC endpoint that serves another chain', async () => {
    await expect(newRelayer(7, { chainId: 10 }).verifyChain()).rejects.toThrow(
      'RPC endpoint serves chain 8453, the relayer is configured for 10',
    );
    await expect(newRelayer(7).verifyChain()).resolves.toBeUndefined();
  });

  it('keeps one relayer per chain in a RelayerSet', async () => {
    const set = new RelayerSet([{ caip2: 'eip155:8453', chainId: 8453n, rpcUrl: node.rpcUrl }], {
      privateKey: devKey(8),
    });
    try {
      await set.verifyChains();
      expect(set.chains()).toEqual(['eip155:8453']);
      expect(await set.for('eip155:8453').submit(request('ping'))).toMatchObject({ kind: 'confirmed' });
      expect(() => set.for('eip155:10')).toThrow('no relayer for chain eip155:10');
    } finally {
      set.destroy();
    }
  });
});
