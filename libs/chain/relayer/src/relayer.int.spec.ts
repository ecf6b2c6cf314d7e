import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Interface, JsonRpcProvider, Transaction, Wallet, id, parseEther, type InterfaceAbi } from 'ethers';
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

/**
 * An RPC endpoint in front of anvil that prices gas as Arbitrum does: every transaction also pays its L1 data posting
 * in L2 gas, so eth_estimateGas answers that much more and a transaction whose gas limit does not cover it is refused
 * "intrinsic gas too low" (a plain transfer needs more than 21000 there).
 */
async function withL1GasComponent(
  upstream: string,
  l1Gas: bigint,
): Promise<{ readonly url: string; close(): Promise<void> }> {
  type Call = { id: unknown; method: string; params?: unknown[] };
  const forward = async (call: Call): Promise<Record<string, unknown>> => {
    if (call.method === 'eth_sendRawTransaction') {
      const tx = Transaction.from(String(call.params?.[0]));
      if (tx.gasLimit < 21_000n + l1Gas)
        return { jsonrpc: '2.0', id: call.id, error: { code: -32000, message: 'intrinsic gas too low' } };
    }
    const response = await fetch(upstream, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(call),
    });
    const answer = (await response.json()) as Record<string, unknown>;
    if (call.method === 'eth_estimateGas' && typeof answer['result'] === 'string')
      answer['result'] = '0x' + (BigInt(answer['result']) + l1Gas).toString(16);
    return answer;
  };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const parsed = JSON.parse(body) as Call | Call[];
      void (Array.isArray(parsed) ? Promise.all(parsed.map(forward)) : forward(parsed)).then((answer) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(answer));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
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

  /**
   * Two pings broadcast (`first`'s, then `second`'s: one relayer or two of one key), the first dropped from the pool
   * and a block mined without it: the second waits queued behind the gap.
   */
  const firstDroppedSecondQueued = async (
    first: ChainRelayer,
    second: ChainRelayer,
  ): Promise<[dropped: Broadcast, behind: Broadcast]> => {
    let sent: [Broadcast, Broadcast] | undefined;
    await withoutAutomine(async () => {
      const a = await first.send(request('ping'));
      const b = await second.send(request('ping'));
      if (a.kind !== 'broadcast' || b.kind !== 'broadcast') throw new Error('expected two broadcasts');
      expect(b.nonce).toBe(a.nonce + 1);
      await admin.send('anvil_dropTransaction', [a.txHash]);
      await admin.send('evm_mine', []);
      expect(await admin.getTransactionCount(first.address, 'latest')).toBe(a.nonce);
      sent = [a, b];
    });
    if (sent === undefined) throw new Error('unreachable');
    return sent;
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

  it('tells beforeBroadcast the hash and nonce of what it broadcasts, and broadcasts nothing when that throws', async () => {
    const relayer = newRelayer(0);
    const told: Array<{ txHash: string; nonce: number }> = [];
    const sent = await relayer.submit(
      request('ping', [], { beforeBroadcast: (tx) => Promise.resolve(void told.push(tx)) }),
    );
    if (sent.kind !== 'confirmed') throw new Error(`expected confirmed, got ${sent.kind}`);
    expect(told).toEqual([{ txHash: sent.txHash, nonce: sent.nonce }]);

    const before = await count();
    const nonce = await admin.getTransactionCount(relayer.address, 'pending');
    await expect(
      relayer.submit(
        request('ping', [], { beforeBroadcast: () => Promise.reject(new Error('not recorded')) }),
      ),
    ).rejects.toThrow('not recorded');
    expect(await admin.getTransactionCount(relayer.address, 'pending')).toBe(nonce);
    expect(await count()).toBe(before);
    // No gap: the next send uses that nonce.
    const next = await relayer.submit(request('ping'));
    expect(next).toMatchObject({ kind: 'confirmed', nonce });
  });

  it("a beforeBroadcast that never answers fails its own send only: another sender's transaction on the chain lands, with the nonce it left free", async () => {
    const relayer = newRelayer(2, { beforeBroadcastTimeoutMs: 300 });
    const nonce = await admin.getTransactionCount(relayer.address, 'pending');
    let inHook!: () => void;
    const hookRunning = new Promise<void>((resolve) => (inHook = resolve));
    const stalled = relayer.submit(
      request('ping', [], {
        beforeBroadcast: () => {
          inHook();
          return new Promise<void>(() => undefined);
        },
      }),
    );
    stalled.catch(() => undefined);
    // Queued behind the stalled hook: the hook runs in the send queue.
    await hookRunning;
    const other = await relayer.submit(request('ping'));

    expect(other).toMatchObject({ kind: 'confirmed', nonce });
    await expect(stalled).rejects.toThrow(/beforeBroadcast did not answer/);
  });

  it('cancels a pending transaction by a no-op at its nonce: the original never lands and the next send follows it', async () => {
    const relayer = newRelayer(1);
    const before = await count();
    let cancelled: Awaited<ReturnType<ChainRelayer['cancel']>> | undefined;
    let pending: Broadcast | undefined;
    await withoutAutomine(async () => {
      const sent = await relayer.send(request('ping'));
      if (sent.kind !== 'broadcast') throw new Error('expected a broadcast');
      pending = sent;
      cancelled = await relayer.cancel(sent.txHash);
      await admin.send('evm_mine', []);
    });
    if (pending === undefined) throw new Error('unreachable');

    expect(cancelled).toMatchObject({ kind: 'replaced', nonce: pending.nonce });
    expect(await admin.getTransactionReceipt(pending.txHash)).toBeNull();
    expect(await count()).toBe(before);
    const noop = await admin.getTransactionReceipt(cancelled?.kind === 'replaced' ? cancelled.txHash : '');
    expect(noop).toMatchObject({ status: 1, to: relayer.address });
    expect(await relayer.cancel(pending.txHash)).toEqual({ kind: 'unknown' });
    const next = await relayer.submit(request('ping'));
    expect(next).toMatchObject({ kind: 'confirmed', nonce: pending.nonce + 1 });
    expect(await relayer.cancel(next.kind === 'confirmed' ? next.txHash : '')).toEqual({ kind: 'mined' });
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
    const [dropped, behind] = await firstDroppedSecondQueued(relayer, relayer);

    const first = await relayer.waitForReceipt(dropped, UNTIL_TEST_TIMEOUT);
    expect(first).toMatchObject({ kind: 'confirmed', txHash: dropped.txHash, nonce: dropped.nonce });
    const second = await relayer.waitForReceipt(behind, UNTIL_TEST_TIMEOUT);
    expect(second).toMatchObject({ kind: 'confirmed', txHash: behind.txHash, nonce: behind.nonce });
    expect(await count()).toBe(before + 2n);
  }, 60_000);

  it("leaves another process's dropped transaction to that process (it re-sends it) instead of filling its nonce with a no-op", async () => {
    // Two processes of one operator key (payments, subscriptions and payouts each hold a relayer).
    const key = Wallet.createRandom().privateKey;
    await admin.send('anvil_setBalance', [new Wallet(key).address, '0x' + parseEther('10').toString(16)]);
    // The other process waits for its own broadcast and checks for gaps later than this one does.
    const own = newRelayer(key, { nonceGapCheckMs: 500 });
    const other = newRelayer(key, { nonceGapCheckMs: 750 });
    const before = await count();
    const [theirs, ours] = await firstDroppedSecondQueued(other, own);

    const [mine, their] = await Promise.all([
      own.waitForReceipt(ours, UNTIL_TEST_TIMEOUT),
      // A ceiling for the case under test: a no-op in its nonce means it never lands.
      other.waitForReceipt(theirs, { timeoutMs: 10_000 }),
    ]);

    expect(their).toMatchObject({ kind: 'confirmed', txHash: theirs.txHash });
    expect(mine).toMatchObject({ kind: 'confirmed', txHash: ours.txHash });
    expect(await count()).toBe(before + 2n);
  }, 60_000);

  it('fills a gap on a chain whose plain transfer needs more than 21000 gas (an L1 component, as on Arbitrum)', async () => {
    const arbitrumLike = await withL1GasComponent(node.rpcUrl, 50_000n);
    try {
      const key = Wallet.createRandom().privateKey;
      await admin.send('anvil_setBalance', [new Wallet(key).address, '0x' + parseEther('10').toString(16)]);
      const relayer = newRelayer(key, { rpcUrl: arbitrumLike.url, nonceGapCheckMs: 200 });
      const first = await pingRevertedAway(relayer);

      // A ceiling for the case under test: a filler the node refuses leaves the gap open for good.
      const second = await relayer.submit(request('ping'), { timeoutMs: 15_000 });

      expect(second).toMatchObject({ kind: 'confirmed', nonce: first.nonce + 1 });
    } finally {
      await arbitrumLike.close();
    }
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
