import type { RegistrationRow } from './chain-registration/registration.store';
import type { MerchantsConfig } from './merchants.config';
import { chainsWithRegistration, presentChainRegistrations, presentSigners } from './settings.presenter';
import type { MerchantSettingsRow } from './settings.reader';

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

  it('is registered while the registry holds this signer although the row asks for a new settlement address', () => {
    for (const status of ['pending', 'change_requires_merchant_signature'] as const)
      expect(
        base(
          presentSigners(merchant, config, [
            { chain: 'eip155:8453', status, signer: SIGNER, chain_signer: SIGNER.toUpperCase() },
          ]),
        )?.status,
      ).toBe('registered');
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

describe("settings' chain_registrations: what a signature over each registry binds", () => {
  const REGISTRY = '0x3333333333333333333333333333333333333333';
  const registrationConfig = { ...config, registryAddress: REGISTRY } as unknown as MerchantsConfig;
  const row = {
    mode: 'test',
    merchant_signer: SIGNER,
    settlement_address: OLD_SIGNER,
  } as unknown as MerchantSettingsRow;
  const registered: RegistrationRow = {
    merchant_id: 'mer_1',
    chain: 'eip155:8453',
    on_chain_id: `0x${'00'.repeat(32)}`,
    signer: SIGNER,
    settlement: OLD_SIGNER,
    status: 'registered',
    tx_hash: `0x${'ab'.repeat(32)}`,
    attempts: 1,
    last_error: null,
    next_attempt_at: new Date(0),
    updated_at: new Date(0),
    chain_signer: SIGNER,
    chain_settlement: OLD_SIGNER,
    chain_tx_hash: `0x${'ab'.repeat(32)}`,
  };

  it('names the registry and the epoch read for the chain, null where no epoch was read', () => {
    const withEpoch = presentChainRegistrations(
      row,
      registrationConfig,
      [registered],
      new Map([['eip155:8453', '3']]),
    );
    expect(withEpoch).toEqual([expect.objectContaining({ registry_address: REGISTRY, epoch: '3' })]);
    expect(presentChainRegistrations(row, registrationConfig, [])).toEqual([
      expect.objectContaining({ status: 'pending', registry_address: REGISTRY, epoch: null }),
    ]);
  });

  it('asks only the chains acted on that have a registration row, and none for the other mode', () => {
    const polygon = { ...registered, chain: 'eip155:137' };
    expect(chainsWithRegistration(row, config, [registered, polygon])).toEqual(['eip155:8453']);
    expect(chainsWithRegistration(row, config, [])).toEqual([]);
    expect(chainsWithRegistration({ mode: 'live' }, config, [registered])).toEqual([]);
  });
});
