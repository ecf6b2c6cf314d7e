import { AbiCoder, Signature, Wallet, ZeroHash, concat, keccak256, toUtf8Bytes } from 'ethers';
import { DomainError } from '@stablepay/util';
import { stablepayDomain, type ChargeMessage } from './eip712';
import {
  REQUEST_KINDS,
  buildChargeTypedData,
  buildTypedData,
  domainSeparator,
  encodeType,
  hashTypedData,
  isSignedBy,
  quoteHash,
  toSignTypedDataV4Payload,
  typeHash,
  typesFor,
  verifyTypedDataSigner,
  type MessageByKind,
  type RequestKind,
} from './typed-data';

// anvil dev account #0: a well-known test key, never a real one.
const SIGNER = new Wallet('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
const OTHER = Wallet.createRandom();
const CONTRACT = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const TOKEN = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const domain = stablepayDomain(8453, CONTRACT);

const charge: ChargeMessage = {
  subscriptionId: `0x${'11'.repeat(32)}`,
  amount: 1_234_567n,
  nonce: 3n,
  quoteHash: quoteHash('refq_test_123'),
  epoch: 2n,
  deadline: 1_767_225_600n,
};

const samples: { readonly [K in RequestKind]: MessageByKind[K] } = {
  Charge: charge,
  CancelSubscription: {
    subscriptionId: charge.subscriptionId,
    nonce: 4n,
    epoch: 2n,
    deadline: 1_767_225_600n,
  },
  SubscribeAuthorization: {
    subscriptionId: charge.subscriptionId,
    subscriber: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
    token: TOKEN,
    cap: 10_000_000n,
    budget: 100_000_000n,
    periodDuration: 2_592_000n,
    firstChargeAmount: 9_990_000n,
    deadline: 1_767_225_600n,
  },
  Capture: {
    paymentId: `0x${'22'.repeat(32)}`,
    token: TOKEN,
    amount: 50_000_000n,
    epoch: 0n,
    deadline: 1_767_225_600n,
  },
  Refund: {
    paymentId: `0x${'22'.repeat(32)}`,
    token: TOKEN,
    payer: '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc',
    amount: 50_000_000n,
    epoch: 0n,
    deadline: 1_767_225_600n,
  },
  PayoutRefund: {
    payoutId: `0x${'33'.repeat(32)}`,
    token: TOKEN,
    to: '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc',
    amount: 25_000_000n,
    epoch: 1n,
    deadline: 1_767_225_600n,
  },
  Rescue: {
    paymentId: `0x${'22'.repeat(32)}`,
    token: TOKEN,
    to: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
    amount: 7n,
    epoch: 0n,
    deadline: 1_767_225_600n,
  },
  DisputePayer: {
    paymentId: `0x${'22'.repeat(32)}`,
    payer: '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc',
    epoch: 1n,
    deadline: 1_767_225_600n,
  },
  MerchantChange: {
    merchantId: `0x${'33'.repeat(32)}`,
    signer: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
    settlement: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
    epoch: 1n,
    deadline: 1_767_225_600n,
  },
  RevokeAuthorizations: { merchantId: `0x${'33'.repeat(32)}`, epoch: 5n, deadline: 1_767_225_600n },
};

// Fixed vectors, computed once and checked in: the contracts' tests can assert the same values.
const CHARGE_VECTOR = {
  encodeType:
    'Charge(bytes32 subscriptionId,uint256 amount,uint256 nonce,bytes32 quoteHash,uint256 epoch,uint256 deadline)',
  typeHash: '0x72552799049628716cfaa880093e7e9aba6f9b670490930cdd3dd02f8dacae86',
  quoteHash: '0xe8aafcf56d8980fa0d933178b0bcd04fcb80a004cad4fc41ee0062edfbb0a987',
  domainSeparator: '0x3ad0902ad6e41e62ec36d73ec51de3de731ac0bff03744afdb6d76cc828d7098',
  digest: '0xc83ed0bc07c27d976342e17c939839af2e42caf9372639da7e5587745565f9ab',
  signature:
    '0xa04d2e0f4eb8fba5ef0c6406b3bf82adefa8fbd58507c2f5d2950e0a835e4ef47ad6ddac92ff2f4fa61bf678877a6dbeb7b4b4f8a5b02fe2acb23e20d591401f1c',
};

/** What a Solidity contract computes: keccak256(abi.encode(TYPEHASH, fields...)) under the domain separator. */
function solidityStyleDigest(kind: RequestKind): string {
  const fields = typesFor(kind)[kind];
  const message = samples[kind] as unknown as Record<string, unknown>;
  const structHash = keccak256(
    AbiCoder.defaultAbiCoder().encode(
      ['bytes32', ...fields.map((f) => f.type)],
      [typeHash(kind), ...fields.map((f) => message[f.name])],
    ),
  );
  const separator = keccak256(
    AbiCoder.defaultAbiCoder().encode(
      ['bytes32', 'bytes32', 'bytes32', 'uint256', 'address'],
      [
        keccak256(
          toUtf8Bytes('EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)'),
        ),
        keccak256(toUtf8Bytes('Stablepay')),
        keccak256(toUtf8Bytes('1')),
        8453n,
        CONTRACT,
      ],
    ),
  );
  return keccak256(concat(['0x1901', separator, structHash]));
}

describe('EIP-712 request hashing', () => {
  it('matches the checked-in Charge vectors', () => {
    expect(encodeType('Charge')).toBe(CHARGE_VECTOR.encodeType);
    expect(typeHash('Charge')).toBe(CHARGE_VECTOR.typeHash);
    expect(charge.quoteHash).toBe(CHARGE_VECTOR.quoteHash);
    expect(domainSeparator(domain)).toBe(CHARGE_VECTOR.domainSeparator);
    expect(hashTypedData('Charge', domain, charge)).toBe(CHARGE_VECTOR.digest);
  });

  it.each(REQUEST_KINDS.map((k) => [k]))(
    'hashes %s exactly as abi.encode-based Solidity code does',
    (kind) => {
      expect(hashTypedData(kind, domain, samples[kind])).toBe(solidityStyleDigest(kind));
    },
  );

  it('binds the subscriber wallet into SubscribeAuthorization, right after subscriptionId', () => {
    expect(encodeType('SubscribeAuthorization')).toBe(
      'SubscribeAuthorization(bytes32 subscriptionId,address subscriber,address token,uint256 cap,uint256 budget,' +
        'uint256 periodDuration,uint256 firstChargeAmount,uint256 deadline)',
    );
    const auth = samples.SubscribeAuthorization;
    const digest = hashTypedData('SubscribeAuthorization', domain, auth);
    expect(hashTypedData('SubscribeAuthorization', domain, { ...auth, subscriber: OTHER.address })).not.toBe(
      digest,
    );
    // Address case does not matter: the same wallet, the same digest.
    expect(
      hashTypedData('SubscribeAuthorization', domain, { ...auth, subscriber: auth.subscriber.toLowerCase() }),
    ).toBe(digest);
  });

  it('binds the chain id and the verifying contract', () => {
    const digest = hashTypedData('Charge', domain, charge);
    expect(hashTypedData('Charge', stablepayDomain(10, CONTRACT), charge)).not.toBe(digest);
    expect(hashTypedData('Charge', stablepayDomain(8453, TOKEN), charge)).not.toBe(digest);
  });

  it('builds typed data whose types are copies: mutating them leaves the shared definitions intact', () => {
    const typed = buildChargeTypedData(domain, charge);
    expect(typed.primaryType).toBe('Charge');
    typed.types.Charge.pop();
    expect(encodeType('Charge')).toBe(CHARGE_VECTOR.encodeType);
  });

  it('produces a JSON-safe eth_signTypedData_v4 payload', () => {
    const payload = toSignTypedDataV4Payload(buildTypedData('Capture', domain, samples.Capture));
    const json = JSON.parse(JSON.stringify(payload)) as {
      primaryType: string;
      types: Record<string, unknown>;
      message: Record<string, unknown>;
    };
    expect(json.primaryType).toBe('Capture');
    expect(Object.keys(json.types)).toEqual(expect.arrayContaining(['EIP712Domain', 'Capture']));
    expect(json.message['amount']).toBe('50000000');
  });
});

describe('verifyTypedDataSigner', () => {
  it('recovers the signer of the checked-in Charge signature', async () => {
    const signature = await SIGNER.signTypedData(domain, typesFor('Charge'), { ...charge });
    expect(signature).toBe(CHARGE_VECTOR.signature);
    expect(verifyTypedDataSigner('Charge', domain, charge, signature)).toBe(SIGNER.address);
  });

  it.each(REQUEST_KINDS.map((k) => [k]))('recovers the signer for %s', async (kind) => {
    const signature = await SIGNER.signTypedData(domain, typesFor(kind), { ...samples[kind] });
    expect(verifyTypedDataSigner(kind, domain, samples[kind], signature)).toBe(SIGNER.address);
  });

  it('does not accept a SubscribeAuthorization for one subscriber as signed for another wallet', async () => {
    const auth = samples.SubscribeAuthorization;
    const signature = await SIGNER.signTypedData(domain, typesFor('SubscribeAuthorization'), { ...auth });
    expect(isSignedBy('SubscribeAuthorization', domain, auth, signature, SIGNER.address)).toBe(true);
    const stolen = { ...auth, subscriber: OTHER.address };
    expect(isSignedBy('SubscribeAuthorization', domain, stolen, signature, SIGNER.address)).toBe(false);
  });

  it('rejects a SubscribeAuthorization whose subscriber is not an address with invalid_typed_data', () => {
    const bad = { ...samples.SubscribeAuthorization, subscriber: '0x1234' };
    expect(
      thrown(() => verifyTypedDataSigner('SubscribeAuthorization', domain, bad, CHARGE_VECTOR.signature))
        .code,
    ).toBe('invalid_typed_data');
  });

  it('recovers a different address when any field differs from what was signed', () => {
    const tampered = { ...charge, amount: charge.amount + 1n };
    expect(verifyTypedDataSigner('Charge', domain, tampered, CHARGE_VECTOR.signature)).not.toBe(
      SIGNER.address,
    );
    expect(isSignedBy('Charge', domain, tampered, CHARGE_VECTOR.signature, SIGNER.address)).toBe(false);
  });

  it('checks the expected signer case-insensitively', () => {
    expect(isSignedBy('Charge', domain, charge, CHARGE_VECTOR.signature, SIGNER.address.toLowerCase())).toBe(
      true,
    );
    expect(isSignedBy('Charge', domain, charge, CHARGE_VECTOR.signature, OTHER.address)).toBe(false);
  });

  it('rejects the malleable high-s twin of a valid signature, as OpenZeppelin ECDSA does', () => {
    const sig = Signature.from(CHARGE_VECTOR.signature);
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const highS = `0x${(n - BigInt(sig.s)).toString(16).padStart(64, '0')}`;
    const twin = concat([sig.r, highS, sig.v === 27 ? '0x1c' : '0x1b']);
    const error = thrown(() => verifyTypedDataSigner('Charge', domain, charge, twin, 'signature'));
    expect(error.code).toBe('invalid_signature');
    expect(error.message).toContain('high s');
  });

  it('rejects a recovery byte other than 27 or 28', () => {
    const v0 = `${CHARGE_VECTOR.signature.slice(0, 130)}00`;
    expect(thrown(() => verifyTypedDataSigner('Charge', domain, charge, v0)).code).toBe('invalid_signature');
  });

  it.each([['0x'], ['0x1234'], [CHARGE_VECTOR.signature.slice(2)], [`${CHARGE_VECTOR.signature}00`]])(
    'rejects the malformed signature %j with invalid_signature on the given param',
    (signature) => {
      const error = thrown(() =>
        verifyTypedDataSigner('Charge', domain, charge, signature, 'merchant_signature'),
      );
      expect(error.code).toBe('invalid_signature');
      expect(error.param).toBe('merchant_signature');
    },
  );

  it('rejects a message that does not fit its type with invalid_typed_data', () => {
    const shortId = { ...charge, subscriptionId: '0x1234' };
    expect(thrown(() => verifyTypedDataSigner('Charge', domain, shortId, CHARGE_VECTOR.signature)).code).toBe(
      'invalid_typed_data',
    );
  });
});

describe('quoteHash', () => {
  it('is keccak256 of the UTF-8 code', () => {
    expect(quoteHash('refq_test_123')).toBe(CHARGE_VECTOR.quoteHash);
    expect(quoteHash('refq_ü')).toBe(keccak256(toUtf8Bytes('refq_ü')));
  });

  it('is the zero hash when there is no quote', () => {
    expect(quoteHash()).toBe(ZeroHash);
    expect(quoteHash(null)).toBe(ZeroHash);
    expect(quoteHash('')).toBe(ZeroHash);
  });
});

function thrown(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}
