import { SubscribeFlow, waitForSubscribeReceipt } from './subscribe-flow';

const TOKEN = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const ASSET = `eip155:8453/erc20:${TOKEN}`;

const MANAGER = '0x1111111111111111111111111111111111111111';
const SIGNER = '0x2222222222222222222222222222222222222222';
const SETTLEMENT = '0x3333333333333333333333333333333333333333';
const CUSTOMER = '0x4444444444444444444444444444444444444444';

// Only what handle() reads before it authorizes: the intent, the deployment's chain mode (test, as the intent's),
// the chain's offered stablecoins and the merchant's own addresses (as SubscriptionManagers reads them).
function flow(): SubscribeFlow {
  const row = {
    id: 'schk_1',
    merchant_id: 'mch_1',
    mode: 'test',
    object: { supported_chains: ['eip155:8453'], status: 'expired' },
  };
  const managers = {
    merchantAddresses: (merchantId: string, chain: string) =>
      Promise.resolve(
        merchantId === 'mch_1' && chain === 'eip155:8453'
          ? [
              { role: 'subscription manager contract', address: MANAGER },
              { role: 'merchant signer', address: SIGNER },
              { role: 'settlement address', address: SETTLEMENT },
            ]
          : [],
      ),
  };
  const chains = {
    chain: () => ({
      chainId: 8453n,
      stablecoins: [{ assetId: ASSET, address: TOKEN, symbol: 'USDC', decimals: 6 }],
    }),
  };
  const unused = {} as never;
  return new SubscribeFlow(
    { find: () => Promise.resolve(row) } as never,
    { chainMode: 'test' } as never,
    managers as never,
    unused,
    chains as never,
    unused,
    { now: () => new Date('2026-11-23T00:00:00Z') } as never,
    unused,
    unused,
  );
}

const subscribe = (subscriber: string) =>
  flow().handle({ commandId: 'c1', checkoutId: 'schk_1', chain: 'eip155:8453', asset: ASSET, subscriber });

describe('SubscribeFlow', () => {
  it('refuses the token contract itself as subscriber before authorizing anything', async () => {
    await expect(subscribe(TOKEN.toLowerCase())).rejects.toMatchObject({
      status: 400,
      type: 'validation_error',
      param: 'subscriber',
      message: expect.stringContaining('token contract'),
    });
  });

  it.each([
    ['subscription manager contract', MANAGER],
    ['merchant signer', SIGNER],
    ['settlement address', SETTLEMENT],
  ])(
    "refuses the merchant's own %s as subscriber (422 subscriber_is_merchant_address)",
    async (role, address) => {
      await expect(subscribe(address)).rejects.toMatchObject({
        status: 422,
        type: 'cannot_process',
        code: 'subscriber_is_merchant_address',
        param: 'subscriber',
        message: expect.stringContaining(role),
      });
    },
  );

  it("lets a customer's wallet through to the intent's own checks", async () => {
    await expect(subscribe(CUSTOMER)).rejects.toMatchObject({ code: 'subscription_checkout_not_pending' });
  });
});

describe('waitForSubscribeReceipt (the public report waiting for its transaction)', () => {
  /** A node that knows the hash from `seenAt` (ms; never when null) and has its receipt from `minedAt`. */
  function node(seenAt: number | null, minedAt: number | null) {
    let now = 0;
    const calls = { count: 0 };
    const receipt = { status: 1 } as never;
    const provider = {
      getTransactionReceipt: () => {
        calls.count += 1;
        return Promise.resolve(minedAt !== null && now >= minedAt ? receipt : null);
      },
      getTransaction: () => {
        calls.count += 1;
        return Promise.resolve(seenAt !== null && now >= seenAt ? ({} as never) : null);
      },
    };
    // Time is the test's: each sleep moves it on, nothing waits.
    const timing = { now: () => now, sleep: (ms: number) => Promise.resolve(void (now += ms)) };
    return { provider, timing, calls, receipt };
  }

  it('gives up on a hash the node never saw after the grace, with a handful of RPC calls (a made-up hash cost ~50)', async () => {
    const { provider, timing, calls } = node(null, null);
    await expect(waitForSubscribeReceipt(provider, '0xab', timing)).resolves.toBe('unknown');
    expect(calls.count).toBeLessThanOrEqual(12);
  });

  it('answers the receipt of a transaction mined while it waits, and pending when it is seen but not mined in time', async () => {
    const mined = node(300, 2_000);
    await expect(waitForSubscribeReceipt(mined.provider, '0xab', mined.timing)).resolves.toBe(mined.receipt);
    const stuck = node(0, null);
    await expect(waitForSubscribeReceipt(stuck.provider, '0xab', stuck.timing)).resolves.toBe('pending');
  });

  it('still finds a transaction the node sees only late in the grace', async () => {
    const late = node(4_500, 4_500);
    await expect(waitForSubscribeReceipt(late.provider, '0xab', late.timing)).resolves.toBe(late.receipt);
  });
});
