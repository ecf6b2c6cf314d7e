import { SubscribeFlow } from './subscribe-flow';

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
