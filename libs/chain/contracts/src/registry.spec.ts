import {
  TypedDataEncoder,
  Wallet,
  ZeroAddress,
  id,
  keccak256,
  parseEther,
  toBeHex,
  toUtf8Bytes,
} from 'ethers';
import { MERCHANT_CHANGE_TYPES, REVOKE_AUTHORIZATIONS_TYPES, stablepayDomain } from '@stablepay/evm';
import type { StablepayRegistryEventArgs } from './generated/StablepayRegistry';
import { startTestChain, type TestChain } from './test-support/anvil';
import {
  deployFixture,
  eventIn,
  expectRevert,
  mined,
  signMerchantChange,
  soon,
  type Fixture,
  type TypedSigner,
} from './test-support/fixture';

type Ev = StablepayRegistryEventArgs;

let chain: TestChain;
let f: Fixture;
let clean: string;

beforeAll(async () => {
  chain = await startTestChain(8453);
  f = await deployFixture(chain);
  clean = await chain.snapshot();
});
afterAll(async () => {
  await chain?.stop();
});
beforeEach(async () => {
  await chain.revert(clean);
  clean = await chain.snapshot();
});

async function consent(signer: string, settlement: string, o: { by?: TypedSigner; epoch?: bigint } = {}) {
  const deadline = await soon(f);
  const sig = await signMerchantChange(o.by ?? f.merchantSigner, f.chainId, f.addresses.registry, {
    merchantId: f.merchantId,
    signer,
    settlement,
    epoch: o.epoch ?? (await f.registry.merchantEpoch(f.merchantId)),
    deadline,
  });
  return [f.merchantId, signer, settlement, deadline, sig] as const;
}

describe('StablepayRegistry: the hot operator key cannot swap a merchant', () => {
  it('registers a new merchant, but cannot change a registered merchant in any way', async () => {
    const fresh = id('merchant:fresh');
    await expectRevert(
      f.registry.connect(f.stranger).registerMerchant(fresh, f.stranger.address, f.stranger.address),
      'NotOperator',
    );
    await mined(f.registry.registerMerchant(fresh, f.merchantSigner.address, f.settlement));
    expect(await f.registry.merchant(fresh)).toEqual([f.merchantSigner.address, f.settlement]);
    // The attack of the review: the operator re-registers the merchant with its own signer and settlement.
    await expectRevert(
      f.registry.registerMerchant(f.merchantId, f.operator.address, f.operator.address),
      'MerchantAlreadyRegistered',
    );
    await expectRevert(
      f.registry.proposeMerchantChange(f.merchantId, f.operator.address, f.operator.address),
      'NotAdmin',
    );
    // A change "consented" by a key other than the current signer.
    await expectRevert(
      f.registry.changeMerchant(
        ...(await consent(f.operator.address, f.operator.address, { by: Wallet.createRandom() })),
      ),
      'InvalidSignature',
    );
    await expectRevert(f.registry.setOperator(f.operator.address), 'NotAdmin');
    await expectRevert(f.registry.setOperatorPauser(f.operator.address), 'NotAdmin');
    expect(await f.registry.merchant(f.merchantId)).toEqual([f.merchantSigner.address, f.settlement]);
  });

  it('applies a change the current signer consented to at once, bumps the epoch, and refuses a replay', async () => {
    const next = Wallet.createRandom();
    const args = await consent(next.address, f.stranger.address);
    const receipt = await mined(f.registry.connect(f.relayer).changeMerchant(...args));
    expect(eventIn<Ev, 'MerchantSignerSet'>(receipt, f.registry, 'MerchantSignerSet')).toEqual({
      merchantId: f.merchantId,
      previousSigner: f.merchantSigner.address,
      newSigner: next.address,
    });
    expect(eventIn<Ev, 'SettlementAddressSet'>(receipt, f.registry, 'SettlementAddressSet')).toMatchObject({
      newSettlement: f.stranger.address,
    });
    expect(eventIn<Ev, 'AuthorizationsRevoked'>(receipt, f.registry, 'AuthorizationsRevoked')).toEqual({
      merchantId: f.merchantId,
      newEpoch: 1n,
    });
    expect(await f.registry.merchant(f.merchantId)).toEqual([next.address, f.stranger.address]);
    expect(await f.registry.merchantAuth(f.merchantId)).toEqual([next.address, 1n]);
    await expectRevert(f.registry.changeMerchant(...args), 'InvalidSignature');
  });

  it('an admin change (lost signer key) waits two days, and the merchant signer can cancel it meanwhile', async () => {
    const asAdmin = f.registry.connect(f.admin);
    const next = Wallet.createRandom().address;
    const proposed = await mined(asAdmin.proposeMerchantChange(f.merchantId, next, f.stranger.address));
    const ev = eventIn<Ev, 'MerchantChangeProposed'>(proposed, f.registry, 'MerchantChangeProposed');
    expect(ev.executableAt).toBe((await chain.now()) + 2n * 86_400n);
    await expectRevert(f.registry.executeMerchantChange(f.merchantId), 'ChangeNotReady');
    // The merchant signer cancels from its own key.
    const signerKey = f.merchantSigner.connect(chain.provider);
    await chain.provider.send('anvil_setBalance', [signerKey.address, toBeHex(parseEther('1'))]);
    await expectRevert(
      f.registry.connect(f.stranger).cancelMerchantChange(f.merchantId),
      'NotMerchantSigner',
    );
    await mined(f.registry.connect(signerKey).cancelMerchantChange(f.merchantId));
    await chain.increaseTime(2n * 86_400n);
    await expectRevert(f.registry.executeMerchantChange(f.merchantId), 'NoPendingChange');
    // Proposed again and left alone, anyone executes it after the delay; the epoch moves on.
    await mined(asAdmin.proposeMerchantChange(f.merchantId, next, f.stranger.address));
    await chain.increaseTime(2n * 86_400n);
    await mined(f.registry.connect(f.stranger).executeMerchantChange(f.merchantId));
    expect(await f.registry.merchantAuth(f.merchantId)).toEqual([next, 1n]);
    expect(await f.registry.merchant(f.merchantId)).toEqual([next, f.stranger.address]);
  });

  it('never sets a zero signer or settlement address', async () => {
    await expectRevert(f.registry.registerMerchant(id('m:zero'), ZeroAddress, f.settlement), 'ZeroAddress');
    await expectRevert(
      f.registry.changeMerchant(...(await consent(f.merchantSigner.address, ZeroAddress))),
      'ZeroAddress',
    );
    await expectRevert(
      f.registry.connect(f.admin).proposeMerchantChange(f.merchantId, ZeroAddress, f.settlement),
      'ZeroAddress',
    );
  });
});

describe('StablepayRegistry: roles', () => {
  it('keeps the admin apart from the operator: the admin sets the operator and rotates itself in two steps', async () => {
    expect(await f.registry.admin()).toBe(f.admin.address);
    expect(await f.registry.operator()).toBe(f.operator.address);
    const asAdmin = f.registry.connect(f.admin);
    await expectRevert(asAdmin.setOperator(ZeroAddress), 'ZeroAddress');
    await mined(asAdmin.setOperator(f.newWallet.address));
    await expectRevert(f.paymentFactory.flagPayment(f.merchantId, id('p')), 'NotOperator');
    await mined(f.paymentFactory.connect(f.newWallet).flagPayment(f.merchantId, id('p')));
    await mined(asAdmin.transferAdmin(f.stranger.address));
    expect(await f.registry.admin()).toBe(f.admin.address);
    await expectRevert(f.registry.connect(f.newWallet).acceptAdmin(), 'NotPendingAdmin');
    await mined(f.registry.connect(f.stranger).acceptAdmin());
    expect(await f.registry.admin()).toBe(f.stranger.address);
    await expectRevert(asAdmin.setOperator(f.operator.address), 'NotAdmin');
  });

  it('computes the same digests as the @stablepay/evm typed data for MerchantChange and RevokeAuthorizations', async () => {
    const domain = stablepayDomain(f.chainId, f.addresses.registry);
    const change = {
      merchantId: f.merchantId,
      signer: f.stranger.address,
      settlement: f.settlement,
      epoch: 2n,
      deadline: 9n,
    };
    expect(
      await f.registry.hashMerchantChange(change.merchantId, change.signer, change.settlement, 2n, 9n),
    ).toBe(TypedDataEncoder.hash(domain, MERCHANT_CHANGE_TYPES, change));
    expect(await f.registry.hashRevokeAuthorizations(f.merchantId, 2n, 9n)).toBe(
      TypedDataEncoder.hash(domain, REVOKE_AUTHORIZATIONS_TYPES, {
        merchantId: f.merchantId,
        epoch: 2n,
        deadline: 9n,
      }),
    );
    expect(await f.registry.MERCHANT_CHANGE_TYPEHASH()).toBe(
      keccak256(toUtf8Bytes(TypedDataEncoder.from(MERCHANT_CHANGE_TYPES).encodeType('MerchantChange'))),
    );
  });
});
