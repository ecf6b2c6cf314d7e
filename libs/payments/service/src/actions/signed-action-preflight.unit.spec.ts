import { Wallet, ZeroAddress } from 'ethers';
import { signCapture, signDisputePayer, signRefund, signRescue } from '@stablepay/merchant-sdk';
import { computeStablepayAddresses, computeTestStablecoinAddresses } from '@stablepay/contracts';
import { DomainError } from '@stablepay/util';
import {
  buildDisputePayer,
  buildSignedAction,
  verifySignedAction,
  type PaymentSigningFacts,
  type SignedActionBody,
  type SignedActionKind,
} from './signed-action-preflight';

const MERCHANT = new Wallet('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d');
const OTHER_KEY = new Wallet('0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a');
const DEPOSIT = '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512';
const OTHER_DEPOSIT = '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0';
const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const DAI = '0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb';
const PAYER = '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc';
const RESCUE_TO = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const NOW = 1_800_000_000n;
const STABLEPAY = computeStablepayAddresses({
  admin: '0x14dC79964da2C08b23698B3D3cc7Ca32193d9955',
  operator: '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65',
  operatorPauser: '0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f',
});
const DEADLINE = NOW + 3_600n;

const payment: PaymentSigningFacts = {
  onChainId: `0x${'ab'.repeat(32)}`,
  depositAddress: DEPOSIT,
  chain: 'eip155:8453',
  asset: `eip155:8453/erc20:${USDC}`,
  payer: PAYER,
};
const chainFacts = { signer: MERCHANT.address, epoch: 2n, chainTime: NOW };
const signing = { chain: payment.chain, verifyingContract: DEPOSIT };

async function captureBody(over: Partial<Parameters<typeof signCapture>[2]> = {}, signer = MERCHANT) {
  const request = {
    paymentId: payment.onChainId,
    token: payment.asset,
    amount: '25000000',
    epoch: 2,
    deadline: DEADLINE,
    ...over,
  };
  const { signature } = await signCapture(signer, signing, request);
  return { amount: String(request.amount), deadline: String(request.deadline), signature };
}

function preflight(kind: SignedActionKind, body: SignedActionBody, digestUsed = false, facts = chainFacts) {
  const action = buildSignedAction(kind, body, payment, facts.epoch, STABLEPAY);
  verifySignedAction(action, facts, digestUsed);
  return action;
}

function refused(run: () => unknown): DomainError {
  try {
    run();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

describe('signed payment action preflight', () => {
  it('accepts a capture signed with signCapture and binds chain, deposit, epoch and amount', async () => {
    const action = preflight('capture', await captureBody());
    expect(action.primaryType).toBe('Capture');
    expect(action.domain).toEqual({
      name: 'Stablepay',
      version: '1',
      chainId: 8453n,
      verifyingContract: DEPOSIT,
    });
    expect(action.message).toEqual({
      paymentId: payment.onChainId,
      token: USDC,
      amount: 25_000_000n,
      epoch: 2n,
      deadline: DEADLINE,
    });
    expect(action.digest).toMatch(/^0x[0-9a-f]{64}$/);
  });

  it('accepts a refund signed with signRefund, to the attested payer', async () => {
    const { signature } = await signRefund(MERCHANT, signing, {
      paymentId: payment.onChainId,
      token: payment.asset,
      payer: PAYER,
      amount: '1000000',
      epoch: 2,
      deadline: DEADLINE,
    });
    const action = preflight('refund', { amount: '1000000', deadline: Number(DEADLINE), signature });
    expect(action.to).toBe(PAYER);
  });

  it('accepts a rescue of another token signed with signRescue', async () => {
    const { signature } = await signRescue(MERCHANT, signing, {
      paymentId: payment.onChainId,
      token: DAI,
      to: RESCUE_TO,
      amount: '5',
      epoch: 2,
      deadline: DEADLINE,
    });
    const action = preflight('rescue', {
      token: `eip155:8453/erc20:${DAI}`,
      to: RESCUE_TO,
      amount: '5',
      deadline: String(DEADLINE),
      signature,
    });
    expect(action.asset).toBe(`eip155:8453/erc20:${DAI}`);
    expect(action.to).toBe(RESCUE_TO);
  });

  it('accepts a rescue of the native coin', async () => {
    const { signature } = await signRescue(MERCHANT, signing, {
      paymentId: payment.onChainId,
      token: ZeroAddress,
      to: RESCUE_TO,
      amount: '7',
      epoch: 2,
      deadline: DEADLINE,
    });
    const action = preflight('rescue', {
      token: 'native',
      to: RESCUE_TO,
      amount: '7',
      deadline: String(DEADLINE),
      signature,
    });
    expect(action.token).toBe(ZeroAddress);
  });

  it('refuses a signature by another key with 422 invalid_signature', async () => {
    const body = await captureBody({}, OTHER_KEY);
    const e = refused(() => preflight('capture', body));
    expect([e.status, e.type, e.code, e.param]).toEqual([
      422,
      'cannot_process',
      'invalid_signature',
      'signature',
    ]);
  });

  it('refuses a signature over another amount than the one sent', async () => {
    const body = { ...(await captureBody()), amount: '25000001' };
    expect(refused(() => preflight('capture', body)).code).toBe('invalid_signature');
  });

  it('refuses a signature for another deposit (domain bound to the deposit address)', async () => {
    const { signature } = await signCapture(
      MERCHANT,
      { chain: payment.chain, verifyingContract: OTHER_DEPOSIT },
      { paymentId: payment.onChainId, token: USDC, amount: '1', epoch: 2, deadline: DEADLINE },
    );
    const body = { amount: '1', deadline: String(DEADLINE), signature };
    expect(refused(() => preflight('capture', body)).code).toBe('invalid_signature');
  });

  it('refuses a signature for another chain (domain bound to the chain id)', async () => {
    const { signature } = await signCapture(
      MERCHANT,
      { chain: 'eip155:137', verifyingContract: DEPOSIT },
      { paymentId: payment.onChainId, token: USDC, amount: '1', epoch: 2, deadline: DEADLINE },
    );
    const body = { amount: '1', deadline: String(DEADLINE), signature };
    expect(refused(() => preflight('capture', body)).code).toBe('invalid_signature');
  });

  it('refuses a signature at an old epoch (revoked) with invalid_signature, or epoch_mismatch when the epoch is sent', async () => {
    const body = await captureBody({ epoch: 1 });
    expect(refused(() => preflight('capture', body)).code).toBe('invalid_signature');
    const e = refused(() => preflight('capture', { ...body, epoch: '1' }));
    expect([e.status, e.code, e.param]).toEqual([422, 'epoch_mismatch', 'epoch']);
  });

  it('refuses a capture signature posted as a refund', async () => {
    const body = await captureBody();
    expect(refused(() => preflight('refund', body)).code).toBe('invalid_signature');
  });

  it('refuses an expired deadline with signature_expired', async () => {
    const body = await captureBody({ deadline: NOW - 1n });
    const e = refused(() => preflight('capture', body));
    expect([e.status, e.code, e.param]).toEqual([422, 'signature_expired', 'deadline']);
  });

  it('refuses a deadline beyond the 7-day horizon with signature_deadline_too_far', async () => {
    const body = await captureBody({ deadline: NOW + 7n * 86_400n + 1n });
    expect(refused(() => preflight('capture', body)).code).toBe('signature_deadline_too_far');
  });

  it('accepts a deadline exactly at the 7-day horizon', async () => {
    const body = await captureBody({ deadline: NOW + 7n * 86_400n });
    expect(() => preflight('capture', body)).not.toThrow();
  });

  it('refuses a digest already burned on chain with 409 signature_already_used', async () => {
    const e = refused(() => preflight('capture', body0, true));
    expect([e.status, e.type, e.code, e.param]).toEqual([
      409,
      'invalid_request',
      'signature_already_used',
      'signature',
    ]);
  });

  it('refuses when the merchant has no signer registered on the chain', async () => {
    const body = await captureBody();
    const e = refused(() => preflight('capture', body, false, { ...chainFacts, signer: ZeroAddress }));
    expect(e.code).toBe('merchant_not_registered');
  });

  it('refuses a refund naming another payer than the attested one', async () => {
    const e = refused(() =>
      buildSignedAction('refund', { ...body0, payer: RESCUE_TO }, payment, 2n, STABLEPAY),
    );
    expect([e.status, e.code, e.param]).toEqual([422, 'payer_mismatch', 'payer']);
  });

  it('refuses a capture of another token than the payment token', () => {
    const e = refused(() =>
      buildSignedAction('capture', { ...body0, token: `eip155:8453/erc20:${DAI}` }, payment, 2n, STABLEPAY),
    );
    expect([e.code, e.param]).toEqual(['token_mismatch', 'token']);
  });

  it('refuses a rescue of the payment token (payer-owned: recover)', () => {
    const e = refused(() =>
      buildSignedAction('rescue', { ...body0, token: USDC, to: RESCUE_TO }, payment, 2n, STABLEPAY),
    );
    expect([e.status, e.code, e.param]).toEqual([422, 'payer_owned_token', 'token']);
  });

  it('refuses a rescue token of another chain than the deposit', () => {
    const e = refused(() =>
      buildSignedAction(
        'rescue',
        { ...body0, token: `eip155:137/erc20:${DAI}`, to: RESCUE_TO },
        payment,
        2n,
        STABLEPAY,
      ),
    );
    expect(e.code).toBe('chain_mismatch');
  });

  it('refuses a rescue to the deposit itself or to the zero address', () => {
    for (const to of [DEPOSIT, ZeroAddress]) {
      const e = refused(() =>
        buildSignedAction('rescue', { ...body0, token: DAI, to }, payment, 2n, STABLEPAY),
      );
      expect([e.code, e.param]).toEqual(['invalid_destination', 'to']);
    }
  });

  it('refuses a rescue to a token contract (the rescued token, the payment token, any known stablecoin): it keeps what it is sent', () => {
    const OTHER_TOKEN = '0x1111111111111111111111111111111111111111';
    const cases: [string, string, RegExp][] = [
      [DAI, DAI, /the eip155:8453\/erc20:0x50c5.* token contract itself/],
      [OTHER_TOKEN, OTHER_TOKEN.toLowerCase(), /token contract itself/],
      [DAI, USDC, /the USDC token contract on eip155:8453/],
      [DAI, computeTestStablecoinAddresses().USDT, /the test USDT token contract/],
    ];
    for (const [token, to, message] of cases) {
      const e = refused(() => buildSignedAction('rescue', { ...body0, token, to }, payment, 2n, STABLEPAY));
      expect([e.status, e.code, e.param]).toEqual([422, 'invalid_destination', 'to']);
      expect(e.message).toMatch(message);
    }
  });

  it("refuses a rescue to one of the deployment's Stablepay contracts: none of them can ever send it on", () => {
    const cases: [string, RegExp][] = [
      [STABLEPAY.paymentFactory, /the Stablepay payment factory contract/],
      [STABLEPAY.registry.toLowerCase(), /the Stablepay registry contract/],
      [STABLEPAY.subscriptionManagerFactory, /the Stablepay subscription manager factory contract/],
      [STABLEPAY.payoutDepositFactory, /the Stablepay payout deposit factory contract/],
      [STABLEPAY.depositImplementation, /implementation contract/],
    ];
    for (const [to, message] of cases) {
      const e = refused(() =>
        buildSignedAction('rescue', { ...body0, token: DAI, to }, payment, 2n, STABLEPAY),
      );
      expect([e.status, e.code, e.param]).toEqual([422, 'invalid_destination', 'to']);
      expect(e.message).toMatch(message);
    }
  });

  it.each([
    [{ amount: '1.5' }, 'amount', 'invalid_amount'],
    [{ amount: '0' }, 'amount', 'invalid_amount'],
    [{ amount: '01' }, 'amount', 'invalid_amount'],
    [{ amount: 5 }, 'amount', 'invalid_amount'],
    [{ deadline: '1e9' }, 'deadline', 'invalid_deadline'],
    [{ deadline: -1 }, 'deadline', 'invalid_deadline'],
    [{ deadline: (1n << 256n).toString() }, 'deadline', 'invalid_deadline'],
    [{ epoch: '9'.repeat(78) }, 'epoch', 'invalid_epoch'],
    [{ signature: '0x1234' }, 'signature', 'invalid_signature'],
    [{ signature: undefined }, 'signature', 'invalid_signature'],
    [{ epoch: 'two' }, 'epoch', 'invalid_epoch'],
  ])('refuses %j with 400 on %s', (over, param, code) => {
    const e = refused(() => buildSignedAction('capture', { ...body0, ...over }, payment, 2n, STABLEPAY));
    expect([e.status, e.type, e.param, e.code]).toEqual([400, 'validation_error', param, code]);
  });

  it.each([
    [{ deadline: '9'.repeat(79) }, 'deadline', 'invalid_deadline'],
    [{ deadline: 1e80 }, 'deadline', 'invalid_deadline'],
    [{ epoch: '9'.repeat(79) }, 'epoch', 'invalid_epoch'],
    [{ amount: '9'.repeat(100) }, 'amount', 'invalid_amount'],
  ])('tells %j it is above uint256, not that it is not an integer', (over, param, code) => {
    const e = refused(() => buildSignedAction('capture', { ...body0, ...over }, payment, 2n, STABLEPAY));
    expect([e.status, e.param, e.code]).toEqual([400, param, code]);
    expect(e.message).toBe(`${param} must be at most 2^256 - 1 (${(1n << 256n) - 1n}), the largest uint256.`);
  });
});

const body0: SignedActionBody = {
  amount: '1',
  deadline: String(DEADLINE),
  signature: `0x${'11'.repeat(64)}1b`,
};

describe('payer dispute preflight (POST /payments/:paymentId/dispute_payer)', () => {
  const disputeBody = async (payer = PAYER, signer = MERCHANT) => {
    const { signature } = await signDisputePayer(signer, signing, {
      paymentId: payment.onChainId,
      payer,
      epoch: 2,
      deadline: DEADLINE,
    });
    return { deadline: String(DEADLINE), signature };
  };

  it('accepts a DisputePayer signed with signDisputePayer over the attested payer', async () => {
    const action = buildDisputePayer(await disputeBody(), payment, 2n);
    expect(action).toMatchObject({
      primaryType: 'DisputePayer',
      message: { paymentId: payment.onChainId, payer: PAYER, epoch: 2n, deadline: DEADLINE },
    });
    expect(() => verifySignedAction(action, chainFacts, false)).not.toThrow();
  });

  it('refuses another key (422 invalid_signature), a signature over another payer, a named other payer (422 payer_mismatch) and a disputed payer (409 payer_disputed)', async () => {
    const otherKey = buildDisputePayer(await disputeBody(PAYER, OTHER_KEY), payment, 2n);
    expect(refused(() => verifySignedAction(otherKey, chainFacts, false))).toMatchObject({
      status: 422,
      code: 'invalid_signature',
      param: 'signature',
    });
    const otherPayer = buildDisputePayer(await disputeBody(RESCUE_TO), payment, 2n);
    expect(refused(() => verifySignedAction(otherPayer, chainFacts, false))).toMatchObject({
      code: 'invalid_signature',
    });
    expect(
      refused(() =>
        buildDisputePayer(
          { payer: RESCUE_TO, deadline: '1', signature: `0x${'11'.repeat(65)}` },
          payment,
          2n,
        ),
      ),
    ).toMatchObject({ status: 422, code: 'payer_mismatch', param: 'payer' });
    expect(
      refused(() =>
        buildDisputePayer(
          { deadline: '1', signature: `0x${'11'.repeat(65)}` },
          { ...payment, payer: ZeroAddress },
          2n,
        ),
      ),
    ).toMatchObject({ status: 409, code: 'payer_disputed' });
  });
});
