import { createChainRegistry } from '@stablepay/evm';
import { ConfigError } from '@stablepay/util';
import { paymentsConfigFromEnv } from './payments.config';

const FACTORY = '0x1234567890AbcdEF1234567890aBcdef12345678';
const OTHER = '0x00000000000000000000000000000000000000aa';

describe('payments configuration', () => {
  it('takes the PaymentFactory from the chain layer; PAYMENT_FACTORY_ADDRESS names it only where there is none', () => {
    expect(paymentsConfigFromEnv({}).paymentFactoryAddress).toBeNull();
    expect(
      paymentsConfigFromEnv({}, { defaultPaymentFactory: FACTORY.toLowerCase() }).paymentFactoryAddress,
    ).toBe(FACTORY);
    expect(paymentsConfigFromEnv({ PAYMENT_FACTORY_ADDRESS: OTHER }).paymentFactoryAddress).toBe(
      '0x00000000000000000000000000000000000000AA',
    );
    expect(
      paymentsConfigFromEnv(
        { PAYMENT_FACTORY_ADDRESS: FACTORY.toLowerCase() },
        { defaultPaymentFactory: FACTORY },
      ).paymentFactoryAddress,
    ).toBe(FACTORY);
    expect(() => paymentsConfigFromEnv({ PAYMENT_FACTORY_ADDRESS: '0x12' })).toThrow(ConfigError);
  });

  it("refuses a PAYMENT_FACTORY_ADDRESS other than the chain layer's: its deposits would never be deployed", () => {
    const start = () =>
      paymentsConfigFromEnv({ PAYMENT_FACTORY_ADDRESS: OTHER }, { defaultPaymentFactory: FACTORY });
    expect(start).toThrow(ConfigError);
    expect(start).toThrow(
      /PAYMENT_FACTORY_ADDRESS \(0x00000000000000000000000000000000000000AA\) is not the PaymentFactory/,
    );
  });

  it('knows the mode of the chains the deployment runs, as the chain layer reads it (none without CHAIN_RPC_URLS)', () => {
    expect(paymentsConfigFromEnv({ CHAIN_MODE: 'test' }).chainMode).toBeNull();
    const rpc = { CHAIN_RPC_URLS: 'eip155:8453=http://anvil:8545' };
    expect(paymentsConfigFromEnv({ ...rpc, CHAIN_MODE: 'test' }).chainMode).toBe('test');
    expect(paymentsConfigFromEnv(rpc).chainMode).toBe('live');
  });

  it("offers test merchants the chain layer's test tokens when given, else the local chains, else mainnet", () => {
    const testRegistry = createChainRegistry({
      mode: 'test',
      localChains: [
        {
          chainId: 8453,
          rpcUrl: 'http://127.0.0.1:1',
          stablecoins: [{ symbol: 'USDC', decimals: 6, address: OTHER }],
        },
      ],
    });
    const config = paymentsConfigFromEnv({}, { testRegistry });
    expect(config.chains.test).toBe(testRegistry);
    expect(config.chains.live.mode).toBe('live');
    // Without either, test merchants see the mainnet registry (the embedded run without local chains).
    expect(paymentsConfigFromEnv({}).chains.test.mode).toBe('live');
  });

  it('refuses a HOSTED_URL that is not http(s) and a SUPPORTED_CHAINS entry that is not supported', () => {
    expect(() => paymentsConfigFromEnv({ HOSTED_URL: 'ftp://x' })).toThrow(/HOSTED_URL/);
    expect(() => paymentsConfigFromEnv({ SUPPORTED_CHAINS: 'eip155:56' })).toThrow(/SUPPORTED_CHAINS/);
    expect(paymentsConfigFromEnv({ HOSTED_URL: 'https://pay.example/hosted/' }).hostedUrl).toBe(
      'https://pay.example/hosted',
    );
  });
});
