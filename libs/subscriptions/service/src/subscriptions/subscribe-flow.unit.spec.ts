import { SubscribeFlow } from './subscribe-flow';

const TOKEN = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const ASSET = `eip155:8453/erc20:${TOKEN}`;

// Only what handle() reads before it authorizes: the intent, the deployment's chain mode (test, as the intent's) and
// the chain's offered stablecoins.
function flow(): SubscribeFlow {
  const row = { id: 'schk_1', mode: 'test', object: { supported_chains: ['eip155:8453'] } };
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
    unused,
    unused,
    chains as never,
    unused,
    unused,
  );
}

describe('SubscribeFlow', () => {
  it('refuses the token contract itself as subscriber before authorizing anything', async () => {
    await expect(
      flow().handle({
        commandId: 'c1',
        checkoutId: 'schk_1',
        chain: 'eip155:8453',
        asset: ASSET,
        subscriber: TOKEN.toLowerCase(),
      }),
    ).rejects.toMatchObject({
      status: 400,
      type: 'validation_error',
      param: 'subscriber',
      message: expect.stringContaining('token contract'),
    });
  });
});
