import { presentSigners } from './settings.presenter';

const SIGNER = '0x1111111111111111111111111111111111111111';
const OLD_SIGNER = '0x2222222222222222222222222222222222222222';
/** A test deployment acting on Base (an RPC URL) and listing Polygon without one. */
const config = {
  supportedChains: ['eip155:8453', 'eip155:137'],
  chainRpcUrls: { 'eip155:8453': 'http://127.0.0.1:8545' },
  chainMode: 'test' as const,
};
const merchant = { mode: 'test' as const, merchant_signer: SIGNER };
const base = (signers: ReturnType<typeof presentSigners>) => signers.find((s) => s.chain === 'eip155:8453');

describe("settings' signers: where the signer stands in each chain's registry", () => {
  it('is pending on a chain the deployment acts on until the registry holds the signer', () => {
    expect(base(presentSigners(merchant, config, []))).toEqual({
      chain: 'eip155:8453',
      address: SIGNER,
      status: 'pending',
    });
    expect(
      base(presentSigners(merchant, config, [{ chain: 'eip155:8453', status: 'pending', signer: SIGNER }]))
        ?.status,
    ).toBe('pending');
  });

  it('is registered once the registration worker found or put this signer in the registry', () => {
    const registered = [
      { chain: 'eip155:8453', status: 'registered' as const, signer: SIGNER.toUpperCase() },
    ];
    expect(base(presentSigners(merchant, config, registered))?.status).toBe('registered');
  });

  it('is pending while the registry still holds the previous signer (a change awaiting its MerchantChange)', () => {
    for (const status of ['registered', 'change_requires_merchant_signature'] as const)
      expect(
        base(presentSigners(merchant, config, [{ chain: 'eip155:8453', status, signer: OLD_SIGNER }]))
          ?.status,
      ).toBe('pending');
  });

  it('says registered (given) on a chain the deployment does not act on, missing without a signer', () => {
    const polygon = presentSigners(merchant, config, []).find((s) => s.chain === 'eip155:137');
    expect(polygon?.status).toBe('registered');
    expect(presentSigners({ mode: 'test', merchant_signer: null }, config, []).map((s) => s.status)).toEqual([
      'missing',
      'missing',
    ]);
  });

  it('is chain_mode_mismatch on every chain for a merchant of the other mode', () => {
    const registered = [{ chain: 'eip155:8453', status: 'registered' as const, signer: SIGNER }];
    expect(
      presentSigners({ mode: 'live', merchant_signer: SIGNER }, config, registered).map((s) => s.status),
    ).toEqual(['chain_mode_mismatch', 'chain_mode_mismatch']);
  });
});
