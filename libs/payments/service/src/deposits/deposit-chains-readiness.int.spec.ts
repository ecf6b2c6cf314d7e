import { Wallet, id } from 'ethers';
import { chainOperatorConfigFromEnv } from '@stablepay/chain-operator';
import { startService, type RunningService } from '@stablepay/runtime';
import {
  createTestDatabase,
  eventually,
  metricValue,
  startHoldingServer,
  type HoldingServer,
  type TestDatabase,
} from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { paymentDepositsService } from './payment-deposits.module';

/**
 * A chain node as the deposit worker sees it (it only reads the head): answers eth_blockNumber with `head`, and
 * holds every request unanswered while told to (a node that hangs).
 */
interface FakeNode extends HoldingServer {
  head: number;
}

async function fakeNode(chainId: number): Promise<FakeNode> {
  const state = { head: 100 };
  const result = (method: string): unknown => {
    if (method === 'eth_chainId') return `0x${chainId.toString(16)}`;
    if (method === 'eth_blockNumber') return `0x${state.head.toString(16)}`;
    return undefined;
  };
  const one = (call: { id: number; method: string }) => {
    const value = result(call.method);
    return value === undefined
      ? { jsonrpc: '2.0', id: call.id, error: { code: -32601, message: `no ${call.method} here` } }
      : { jsonrpc: '2.0', id: call.id, result: value };
  };
  const server = await startHoldingServer(async (raw) => {
    const body = JSON.parse(raw.toString('utf8')) as
      { id: number; method: string } | Array<{ id: number; method: string }>;
    return { status: 200, body: JSON.stringify(Array.isArray(body) ? body.map(one) : one(body)) };
  });
  return Object.assign(state, server);
}

/**
 * /ready and /metrics of the payments deposit worker while a chain's node hangs: its head read waits (then times
 * out at its deadline and the next one waits again), and no deposit on that chain is confirmed meanwhile. The clock
 * is a ManualClock: the test walks it past the threshold once the worker is known to be waiting on the node.
 */
describe('payment deposit worker readiness when a chain node stops answering', () => {
  const chain = 'eip155:8453';
  const clock = new ManualClock('2026-11-23T22:00:00.000Z');
  let database: TestDatabase;
  let node: FakeNode;
  let service: RunningService;

  beforeAll(async () => {
    [database, node] = await Promise.all([createTestDatabase(), fakeNode(8453)]);
    const config = chainOperatorConfigFromEnv({
      CHAIN_RPC_URLS: `${chain}=${node.url}`,
      CHAIN_MODE: 'test',
      OPERATOR_PRIVATE_KEY: id('deposit readiness test operator'),
      REGISTRY_ADMIN_ADDRESS: new Wallet(id('deposit readiness test admin')).address,
      OPERATOR_PAUSER_ADDRESS: new Wallet(id('deposit readiness test pauser')).address,
    });
    service = await startService(
      {
        databaseUrl: database.url,
        eventStore: 'postgres',
        eventBus: 'store-log',
        port: 0,
        host: '127.0.0.1',
        logLevel: 'fatal',
      },
      [paymentDepositsService(config)],
      { service: 'payments', clock },
    );
  });

  afterAll(async () => {
    node?.release();
    await service?.stop();
    await node?.close();
    await database?.drop();
  });

  const depositChainsCheck = async (): Promise<{ status: number; check: string | undefined }> => {
    const response = await fetch(`${service.url}/ready`);
    const body = (await response.json()) as { checks: Record<string, string> };
    return { status: response.status, check: body.checks['deposit_chains'] };
  };
  const gauge = async (name: string): Promise<number> =>
    metricValue(await (await fetch(`${service.url}/metrics`)).text(), name, { chain });

  it('reports the chain degraded with the silence, then ok again once the node answers, and the gauges move', async () => {
    await eventually(
      () => gauge('stablepay_payment_deposit_chain_head_block'),
      (head) => head === 100,
      'the first head read',
    );
    expect(await depositChainsCheck()).toEqual({ status: 200, check: 'ok' });

    node.hold();
    await eventually(
      async () => node.held(),
      (held) => held > 0,
      'the worker waiting on the node',
    );
    clock.advance(31_000);

    // Degraded, not failed: the API and the other chains still serve, and every replica asks the same node.
    expect(await depositChainsCheck()).toEqual({
      status: 200,
      check: `degraded: ${chain} RPC unanswered for 31 s`,
    });
    expect(await gauge('stablepay_payment_deposit_seconds_since_chain_head')).toBe(31);

    node.head = 102;
    node.release();
    await eventually(
      async () => [
        await gauge('stablepay_payment_deposit_chain_head_block'),
        await gauge('stablepay_payment_deposit_seconds_since_chain_head'),
      ],
      ([head, seconds]) => head === 102 && seconds === 0,
      'a head read that answered',
    );
    expect(await depositChainsCheck()).toEqual({ status: 200, check: 'ok' });
  });
});
