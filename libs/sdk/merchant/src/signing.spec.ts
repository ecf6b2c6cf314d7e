import {
  AbstractSigner,
  Wallet,
  type Provider,
  type TransactionRequest,
  type TypedDataDomain,
  type TypedDataField,
} from 'ethers';
import { id } from 'ethers';
import { quoteHash, verifyTypedDataSigner } from '@stablepay/evm';
import { DomainError } from '@stablepay/util';
import {
  signCancelSubscription,
  signCapture,
  signCharge,
  signDisputePayer,
  signMerchantChange,
  signPayoutRefund,
  signRefund,
  signRescue,
  signRevokeAuthorizations,
} from './signing';

// anvil dev account #0: a well-known test key, never a real one.
const MERCHANT = new Wallet('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
const MANAGER = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const DEPOSIT = '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512';
const USDC_BASE = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const REGISTRY = '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0';
const OTHER_TOKEN = '0xdAC17F958D2ee523a2206206994597C13D831ec7';
const SUBSCRIPTION_ID = `0x${'11'.repeat(32)}`;
const PAYMENT_ID = `0x${'22'.repeat(32)}`;
const DEADLINE = new Date('2026-01-01T00:00:00Z');

// The Charge vector of @stablepay/evm's typed-data spec: the SDK, fed API-shaped input, must produce the same bytes.
const CHARGE_SIGNATURE =
  '0xa04d2e0f4eb8fba5ef0c6406b3bf82adefa8fbd58507c2f5d2950e0a835e4ef47ad6ddac92ff2f4fa61bf678877a6dbeb7b4b4f8a5b02fe2acb23e20d591401f1c';
// Computed once with a bare ethers Wallet.signTypedData over the hand-written Capture type and checked in.
const CAPTURE_SIGNATURE =
  '0xc5847668403c06d288b66cb3fe1afc3ce2caa62c0d575e7e73bfa23a09de262928f32fe006c4ae7ceb9abc9f1f26dd6484db9c6ca898ffe69e76b6258ab76aa31c';

/** A wallet that, like some hardware and browser wallets, returns v as 0/1 instead of 27/28. */
class ZeroOneVSigner extends AbstractSigner {
  constructor(private readonly wallet: Wallet) {
    super();
  }
  getAddress(): Promise<string> {
    return this.wallet.getAddress();
  }
  connect(_provider: Provider | null): ZeroOneVSigner {
    return this;
  }
  signTransaction(tx: TransactionRequest): Promise<string> {
    return this.wallet.signTransaction(tx);
  }
  signMessage(message: string | Uint8Array): Promise<string> {
    return this.wallet.signMessage(message);
  }
  async signTypedData(
    domain: TypedDataDomain,
    types: Record<string, TypedDataField[]>,
    value: Record<string, unknown>,
  ): Promise<string> {
    const signature = await this.wallet.signTypedData(domain, types, value);
    const v = Number.parseInt(signature.slice(130), 16) - 27;
    return `${signature.slice(0, 130)}0${v}`;
  }
}

/** A wallet whose reported address is not the key that signs (a misconfigured remote signer). */
class MismatchedSigner extends ZeroOneVSigner {
  override getAddress(): Promise<string> {
    return Promise.resolve('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
  }
}

function domainError(promise: Promise<unknown>): Promise<DomainError> {
  return promise.then(
    () => {
      throw new Error('expected a DomainError');
    },
    (error: unknown) => {
      if (error instanceof DomainError) return error;
      throw error;
    },
  );
}

describe('signCharge', () => {
  it('turns API-shaped input into the checked-in Charge signature', async () => {
    const { signature, typedData } = await signCharge(
      MERCHANT,
      { chain: 'eip155:8453', verifyingContract: MANAGER.toLowerCase() },
      {
        subscriptionId: SUBSCRIPTION_ID,
        amount: '1234567',
        nonce: 3,
        epoch: '2',
        deadline: DEADLINE,
        quoteCode: 'refq_test_123',
      },
    );

    expect(signature).toBe(CHARGE_SIGNATURE);
    expect(typedData).toEqual({
      domain: { name: 'Stablepay', version: '1', chainId: 8453n, verifyingContract: MANAGER },
      types: { Charge: expect.any(Array) as unknown },
      primaryType: 'Charge',
      message: {
        subscriptionId: SUBSCRIPTION_ID,
        amount: 1_234_567n,
        nonce: 3n,
        quoteHash: quoteHash('refq_test_123'),
        epoch: 2n,
        deadline: 1_767_225_600n,
      },
    });
  });

  it('binds the zero quote hash when the plan has no quote', async () => {
    const { typedData } = await signCharge(
      MERCHANT,
      { chain: 8453, verifyingContract: MANAGER },
      { subscriptionId: SUBSCRIPTION_ID, amount: 1n, nonce: 0n, epoch: 0, deadline: 1_767_225_600 },
    );
    expect(typedData.message.quoteHash).toBe(`0x${'00'.repeat(32)}`);
  });

  it('normalises a 0/1 recovery byte to the 27/28 the contracts accept', async () => {
    const { signature } = await signCharge(
      new ZeroOneVSigner(MERCHANT),
      { chain: 'eip155:8453', verifyingContract: MANAGER },
      {
        subscriptionId: SUBSCRIPTION_ID,
        amount: '1234567',
        nonce: 3,
        epoch: '2',
        deadline: DEADLINE,
        quoteCode: 'refq_test_123',
      },
    );
    expect(signature).toBe(CHARGE_SIGNATURE);
  });

  it('refuses to return a signature that does not recover to the signer', async () => {
    await expect(
      signCharge(
        new MismatchedSigner(MERCHANT),
        { chain: 'eip155:8453', verifyingContract: MANAGER },
        { subscriptionId: SUBSCRIPTION_ID, amount: 1n, nonce: 0n, epoch: 0, deadline: DEADLINE },
      ),
    ).rejects.toThrow(`The signature recovers to ${MERCHANT.address}`);
  });

  it.each([
    ['1.5', 'amount'],
    ['-1', 'amount'],
    ['01', 'amount'],
    [1.5, 'amount'],
  ])('rejects the amount %j with invalid_integer', async (amount, param) => {
    const error = await domainError(
      signCharge(
        MERCHANT,
        { chain: 'eip155:8453', verifyingContract: MANAGER },
        { subscriptionId: SUBSCRIPTION_ID, amount, nonce: 0, epoch: 0, deadline: DEADLINE },
      ),
    );
    expect(error.code).toBe('invalid_integer');
    expect(error.param).toBe(param);
  });

  it('rejects a subscription id that is not 32 bytes', async () => {
    const error = await domainError(
      signCharge(
        MERCHANT,
        { chain: 'eip155:8453', verifyingContract: MANAGER },
        { subscriptionId: '0x11', amount: 1, nonce: 0, epoch: 0, deadline: DEADLINE },
      ),
    );
    expect(error.param).toBe('subscriptionId');
  });

  it('rejects a non-EVM chain with unsupported_chain_namespace', async () => {
    const error = await domainError(
      signCharge(
        MERCHANT,
        { chain: 'solana:mainnet', verifyingContract: MANAGER },
        { subscriptionId: SUBSCRIPTION_ID, amount: 1, nonce: 0, epoch: 0, deadline: DEADLINE },
      ),
    );
    expect(error.code).toBe('unsupported_chain_namespace');
  });
});

describe('signCancelSubscription', () => {
  it('signs a cancel that API preflight attributes to the merchant signer', async () => {
    const { signature, typedData } = await signCancelSubscription(
      MERCHANT,
      { chain: 'eip155:137', verifyingContract: MANAGER },
      { subscriptionId: SUBSCRIPTION_ID, nonce: '4', epoch: 1n, deadline: DEADLINE },
    );
    expect(typedData.domain.chainId).toBe(137n);
    expect(verifyTypedDataSigner('CancelSubscription', typedData.domain, typedData.message, signature)).toBe(
      MERCHANT.address,
    );
  });
});

describe('payment signers', () => {
  const domain = { chain: 'eip155:8453', verifyingContract: DEPOSIT };
  const capture = {
    paymentId: PAYMENT_ID,
    token: `eip155:8453/erc20:${USDC_BASE.toLowerCase()}`,
    amount: '50000000',
    epoch: 0,
    deadline: DEADLINE,
  };
  const PAYER = '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc';

  it('signs a capture from the payment object fields into the checked-in signature', async () => {
    const { signature, typedData } = await signCapture(MERCHANT, domain, capture);
    expect(typedData.message).toEqual({
      paymentId: PAYMENT_ID,
      token: USDC_BASE,
      amount: 50_000_000n,
      epoch: 0n,
      deadline: 1_767_225_600n,
    });
    expect(signature).toBe(CAPTURE_SIGNATURE);
  });

  it('signs the same capture whether the token is a CAIP-19 id or an address', async () => {
    const viaAddress = await signCapture(MERCHANT, domain, { ...capture, token: USDC_BASE });
    expect(viaAddress.signature).toBe(CAPTURE_SIGNATURE);
  });

  it('refuses a CAIP-19 token from another chain than the one being signed for', async () => {
    const error = await domainError(
      signCapture(MERCHANT, domain, { ...capture, token: `eip155:10/erc20:${USDC_BASE}` }),
    );
    expect(error.code).toBe('chain_mismatch');
    expect(error.param).toBe('token');
  });

  it('signs a refund distinct from a capture of the same fields', async () => {
    const refund = await signRefund(MERCHANT, domain, { ...capture, payer: PAYER.toLowerCase() });
    expect(refund.typedData.primaryType).toBe('Refund');
    expect(refund.typedData.message.payer).toBe(PAYER);
    expect(refund.signature).not.toBe(CAPTURE_SIGNATURE);
    expect(
      verifyTypedDataSigner('Refund', refund.typedData.domain, refund.typedData.message, refund.signature),
    ).toBe(MERCHANT.address);
  });

  it('signs a rescue to a checksummed destination', async () => {
    const rescue = await signRescue(MERCHANT, domain, {
      ...capture,
      token: OTHER_TOKEN,
      to: '0x70997970c51812dc3a010c7d01b50e0d17dc79c8',
    });
    expect(rescue.typedData.message.to).toBe('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
    expect(
      verifyTypedDataSigner('Rescue', rescue.typedData.domain, rescue.typedData.message, rescue.signature),
    ).toBe(MERCHANT.address);
  });

  it('signs a payer dispute that names the disputed payer', async () => {
    const dispute = await signDisputePayer(MERCHANT, domain, {
      paymentId: PAYMENT_ID,
      payer: PAYER,
      epoch: 3,
      deadline: DEADLINE,
    });
    expect(dispute.typedData.message).toEqual({
      paymentId: PAYMENT_ID,
      payer: PAYER,
      epoch: 3n,
      deadline: 1_767_225_600n,
    });
    expect(
      verifyTypedDataSigner(
        'DisputePayer',
        dispute.typedData.domain,
        dispute.typedData.message,
        dispute.signature,
      ),
    ).toBe(MERCHANT.address);
  });

  it('signs a payout refund naming the payout by its hashed id, as the service binds it', async () => {
    const refund = await signPayoutRefund(
      MERCHANT,
      { chain: 'eip155:8453', verifyingContract: DEPOSIT },
      {
        payoutId: 'po_123',
        token: `eip155:8453/erc20:${USDC_BASE}`,
        to: PAYER.toLowerCase(),
        amount: '25000000',
        epoch: 0,
        deadline: DEADLINE,
      },
    );
    expect(refund.typedData.primaryType).toBe('PayoutRefund');
    expect(refund.typedData.message).toEqual({
      payoutId: id('po_123'),
      token: USDC_BASE,
      to: PAYER,
      amount: 25_000_000n,
      epoch: 0n,
      deadline: 1_767_225_600n,
    });
    expect(
      verifyTypedDataSigner(
        'PayoutRefund',
        refund.typedData.domain,
        refund.typedData.message,
        refund.signature,
      ),
    ).toBe(MERCHANT.address);
  });

  it('rejects an epoch that is not an integer', async () => {
    const error = await domainError(signCapture(MERCHANT, domain, { ...capture, epoch: '1.5' }));
    expect(error.code).toBe('invalid_integer');
    expect(error.param).toBe('epoch');
  });

  it('rejects a rescue destination that is not an address', async () => {
    const error = await domainError(
      signRescue(MERCHANT, domain, { ...capture, token: OTHER_TOKEN, to: 'vitalik.eth' }),
    );
    expect(error.param).toBe('to');
  });
});

describe('registry signers', () => {
  const domain = { chain: 'eip155:8453', verifyingContract: REGISTRY };
  const merchantId = `0x${'33'.repeat(32)}`;

  it('signs a consented merchant change that recovers to the current signer', async () => {
    const change = await signMerchantChange(MERCHANT, domain, {
      merchantId,
      signer: '0x70997970c51812dc3a010c7d01b50e0d17dc79c8',
      settlement: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
      epoch: 1,
      deadline: DEADLINE,
    });
    expect(change.typedData.message.signer).toBe('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
    expect(
      verifyTypedDataSigner(
        'MerchantChange',
        change.typedData.domain,
        change.typedData.message,
        change.signature,
      ),
    ).toBe(MERCHANT.address);
  });

  it('signs a revocation of every outstanding authorization at the current epoch', async () => {
    const revoke = await signRevokeAuthorizations(MERCHANT, domain, {
      merchantId,
      epoch: 5,
      deadline: DEADLINE,
    });
    expect(revoke.typedData.message).toEqual({ merchantId, epoch: 5n, deadline: 1_767_225_600n });
    expect(
      verifyTypedDataSigner(
        'RevokeAuthorizations',
        revoke.typedData.domain,
        revoke.typedData.message,
        revoke.signature,
      ),
    ).toBe(MERCHANT.address);
  });
});
