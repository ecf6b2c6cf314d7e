import type { RunningService } from '@stablepay/runtime';
import {
  createTestDatabase,
  startHoldingServer,
  type HoldingServer,
  type TestDatabase,
} from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { startIndexerOnChain } from './testing/indexer-on-chain';
import { startTestChain, type TestChain } from './testing/test-chain';

/** A JSON-RPC hop in front of anvil that can stop answering (held requests wait, unanswered, until release). */
function hangingProxy(target: string): Promise<HoldingServer> {
  return startHoldingServer(async (body) => {
    const answer = await fetch(target, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    return { status: answer.status, body: await answer.text() };
  });
}

async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * /ready and /metrics of the indexer while its chain's node hangs: the follower fails nothing while it waits, so
 * only the time since its last successful poll can show it. The clock is a ManualClock: the test walks it past the
 * threshold once the follower is known to be waiting on the node.
 */
describe('chain followers readiness when the node stops answering', () => {
  const clock = new ManualClock('2026-11-23T19:00:00.000Z');
  let database: TestDatabase;
  let chain: TestChain;
  let proxy: HoldingServer;
  let service: RunningService;

  beforeAll(async () => {
    [database, chain] = await Promise.all([createTestDatabase(), startTestChain(900_101)]);
    proxy = await hangingProxy(chain.rpcUrl);
    service = await startIndexerOnChain({
      databaseUrl: database.url,
      chain: { ...chain, rpcUrl: proxy.url },
      pollMs: 20,
      stalledAfterMs: 30_000,
      clock,
    });
  });

  afterAll(async () => {
    proxy?.release();
    await service?.stop();
    await proxy?.close();
    await chain?.stop();
    await database?.drop();
  });

  const followersCheck = async (): Promise<{ status: number; check: string | undefined }> => {
    const response = await fetch(`${service.url}/ready`);
    const body = (await response.json()) as { checks: Record<string, string> };
    return { status: response.status, check: body.checks['chain_followers'] };
  };

  const gauge = async (name: string): Promise<number | undefined> => {
    const text = await (await fetch(`${service.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{chain="${chain.caip2}"}`));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  };

  it('reports the chain degraded with the silence, then ok again once the node answers, and the gauges move', async () => {
    const head = await chain.head();
    await until(async () => (await gauge('stablepay_indexer_head_block')) === head, 'the first poll');
    expect(await followersCheck()).toEqual({ status: 200, check: 'ok' });

    proxy.hold();
    await until(async () => proxy.held() > 0, 'the follower waiting on the node');
    clock.advance(31_000);

    // Degraded, not failed: the HTTP API and other chains still serve, and every replica asks the same node.
    expect(await followersCheck()).toEqual({
      status: 200,
      check: `degraded: ${chain.caip2} RPC unanswered for 31 s`,
    });
    expect(await gauge('stablepay_indexer_seconds_since_last_poll')).toBe(31);

    await chain.mine(2);
    proxy.release();
    await until(
      async () =>
        (await gauge('stablepay_indexer_head_block')) === head + 2 &&
        (await gauge('stablepay_indexer_seconds_since_last_poll')) === 0,
      'a completed poll that saw the new head',
    );
    expect(await followersCheck()).toEqual({ status: 200, check: 'ok' });
  });
});
