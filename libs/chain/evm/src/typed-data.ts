import {
  Signature,
  TypedDataEncoder,
  ZeroHash,
  keccak256,
  recoverAddress,
  toUtf8Bytes,
  type TypedDataField,
} from 'ethers';
import { validationError } from '@stablepay/util';
import {
  CANCEL_SUBSCRIPTION_TYPES,
  CAPTURE_TYPES,
  CHARGE_TYPES,
  DISPUTE_PAYER_TYPES,
  MERCHANT_CHANGE_TYPES,
  PAYOUT_REFUND_TYPES,
  REFUND_TYPES,
  RESCUE_TYPES,
  REVOKE_AUTHORIZATIONS_TYPES,
  SUBSCRIBE_AUTHORIZATION_TYPES,
  type CancelSubscriptionMessage,
  type CaptureMessage,
  type ChargeMessage,
  type DisputePayerMessage,
  type Eip712Domain,
  type MerchantChangeMessage,
  type PayoutRefundMessage,
  type RefundMessage,
  type RescueMessage,
  type RevokeAuthorizationsMessage,
  type SubscribeAuthorizationMessage,
} from './eip712';

/**
 * Helpers over the definitions in eip712.ts: one function builds, hashes and verifies every request kind, so the
 * merchant SDK (signing), API preflight (verification) and the contracts' tests agree byte for byte.
 */
export interface MessageByKind {
  readonly Charge: ChargeMessage;
  readonly CancelSubscription: CancelSubscriptionMessage;
  readonly SubscribeAuthorization: SubscribeAuthorizationMessage;
  readonly Capture: CaptureMessage;
  readonly Refund: RefundMessage;
  readonly Rescue: RescueMessage;
  readonly DisputePayer: DisputePayerMessage;
  readonly MerchantChange: MerchantChangeMessage;
  readonly RevokeAuthorizations: RevokeAuthorizationsMessage;
  readonly PayoutRefund: PayoutRefundMessage;
}

export type RequestKind = keyof MessageByKind;

export const REQUEST_KINDS: readonly RequestKind[] = [
  'Charge',
  'CancelSubscription',
  'SubscribeAuthorization',
  'Capture',
  'Refund',
  'Rescue',
  'DisputePayer',
  'MerchantChange',
  'RevokeAuthorizations',
  'PayoutRefund',
];

const TYPES_BY_KIND: {
  readonly [K in RequestKind]: Record<K, readonly { readonly name: string; readonly type: string }[]>;
} = {
  Charge: CHARGE_TYPES,
  CancelSubscription: CANCEL_SUBSCRIPTION_TYPES,
  SubscribeAuthorization: SUBSCRIBE_AUTHORIZATION_TYPES,
  Capture: CAPTURE_TYPES,
  Refund: REFUND_TYPES,
  Rescue: RESCUE_TYPES,
  DisputePayer: DISPUTE_PAYER_TYPES,
  MerchantChange: MERCHANT_CHANGE_TYPES,
  RevokeAuthorizations: REVOKE_AUTHORIZATIONS_TYPES,
  PayoutRefund: PAYOUT_REFUND_TYPES,
};

/** The input of `signTypedData` / `eth_signTypedData_v4` (the EIP712Domain type is implied by `domain`). */
export interface TypedData<K extends RequestKind = RequestKind> {
  readonly domain: Eip712Domain;
  readonly types: Record<K, TypedDataField[]>;
  readonly primaryType: K;
  readonly message: MessageByKind[K];
}

/** Fresh, mutable copies: ethers' signatures take mutable arrays, and callers must never alter the shared definitions. */
export function typesFor<K extends RequestKind>(kind: K): Record<K, TypedDataField[]> {
  const fields = TYPES_BY_KIND[kind][kind].map((f) => ({ name: f.name, type: f.type }));
  return { [kind]: fields } as Record<K, TypedDataField[]>;
}

export function buildTypedData<K extends RequestKind>(
  kind: K,
  domain: Eip712Domain,
  message: MessageByKind[K],
): TypedData<K> {
  return { domain, types: typesFor(kind), primaryType: kind, message };
}

export const buildChargeTypedData = (domain: Eip712Domain, message: ChargeMessage): TypedData<'Charge'> =>
  buildTypedData('Charge', domain, message);
export const buildCancelSubscriptionTypedData = (
  domain: Eip712Domain,
  message: CancelSubscriptionMessage,
): TypedData<'CancelSubscription'> => buildTypedData('CancelSubscription', domain, message);
export const buildSubscribeAuthorizationTypedData = (
  domain: Eip712Domain,
  message: SubscribeAuthorizationMessage,
): TypedData<'SubscribeAuthorization'> => buildTypedData('SubscribeAuthorization', domain, message);
export const buildCaptureTypedData = (domain: Eip712Domain, message: CaptureMessage): TypedData<'Capture'> =>
  buildTypedData('Capture', domain, message);
export const buildRefundTypedData = (domain: Eip712Domain, message: RefundMessage): TypedData<'Refund'> =>
  buildTypedData('Refund', domain, message);
export const buildRescueTypedData = (domain: Eip712Domain, message: RescueMessage): TypedData<'Rescue'> =>
  buildTypedData('Rescue', domain, message);
export const buildDisputePayerTypedData = (
  domain: Eip712Domain,
  message: DisputePayerMessage,
): TypedData<'DisputePayer'> => buildTypedData('DisputePayer', domain, message);
export const buildMerchantChangeTypedData = (
  domain: Eip712Domain,
  message: MerchantChangeMessage,
): TypedData<'MerchantChange'> => buildTypedData('MerchantChange', domain, message);
export const buildRevokeAuthorizationsTypedData = (
  domain: Eip712Domain,
  message: RevokeAuthorizationsMessage,
): TypedData<'RevokeAuthorizations'> => buildTypedData('RevokeAuthorizations', domain, message);

export const buildPayoutRefundTypedData = (
  domain: Eip712Domain,
  message: PayoutRefundMessage,
): TypedData<'PayoutRefund'> => buildTypedData('PayoutRefund', domain, message);

/** `Charge(bytes32 subscriptionId,uint256 amount,...)`: what the Solidity typehash constant must hash. */
export function encodeType(kind: RequestKind): string {
  return TypedDataEncoder.from(typesFor(kind)).encodeType(kind);
}

/** keccak256 of encodeType(kind): equals the contract's `*_TYPEHASH`. */
export function typeHash(kind: RequestKind): string {
  return keccak256(toUtf8Bytes(encodeType(kind)));
}

/** The EIP-712 digest (`\x19\x01 ‖ domainSeparator ‖ structHash`) that gets signed and that ecrecover checks. */
export function hashTypedData<K extends RequestKind>(
  kind: K,
  domain: Eip712Domain,
  message: MessageByKind[K],
): string {
  return TypedDataEncoder.hash(domain, typesFor(kind), { ...message });
}

export function domainSeparator(domain: Eip712Domain): string {
  return TypedDataEncoder.hashDomain(domain);
}

/** JSON-safe `eth_signTypedData_v4` payload (with EIP712Domain, numbers as decimal strings), for wallets and logs. */
export function toSignTypedDataV4Payload<K extends RequestKind>(typedData: TypedData<K>): unknown {
  return TypedDataEncoder.getPayload(typedData.domain, typedData.types, { ...typedData.message });
}

// secp256k1 group order / 2: signatures with a higher s are the malleable twin of a valid one. OpenZeppelin's ECDSA
// (what the contracts use) rejects them, so preflight must too, or it would accept what the chain then refuses.
const SECP256K1_HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;
const SIGNATURE_HEX = /^0x[0-9a-fA-F]{130}$/;

/**
 * Recovers the address (EIP-55) that signed `message` of `kind` under `domain`. API preflight compares it with the
 * registered merchant signer. Throws validation_error `invalid_signature` on `param` when the signature is not a
 * 65-byte hex string, has a high s, a v other than 27/28, or recovers no address; throws validation_error `invalid_typed_data`
 * when the message does not fit the type (e.g. a 31-byte subscriptionId).
 */
export function verifyTypedDataSigner<K extends RequestKind>(
  kind: K,
  domain: Eip712Domain,
  message: MessageByKind[K],
  signature: string,
  param = 'signature',
): string {
  let digest: string;
  try {
    digest = hashTypedData(kind, domain, message);
  } catch (error) {
    throw validationError(
      param,
      `The ${kind} request does not match its EIP-712 type: ${errorText(error)}`,
      'invalid_typed_data',
    );
  }
  if (typeof signature !== 'string' || !SIGNATURE_HEX.test(signature)) {
    throw validationError(
      param,
      'The signature must be 65 bytes as 0x-prefixed hex (r ‖ s ‖ v)',
      'invalid_signature',
    );
  }
  const v = Number.parseInt(signature.slice(130, 132), 16);
  // ecrecover (and so OpenZeppelin's ECDSA) only takes v = 27 or 28.
  if (v !== 27 && v !== 28) {
    throw validationError(
      param,
      'The signature has an invalid recovery byte v (expected 27 or 28)',
      'invalid_signature',
    );
  }
  if (BigInt(`0x${signature.slice(66, 130)}`) > SECP256K1_HALF_N) {
    throw validationError(param, 'The signature is not canonical (high s value)', 'invalid_signature');
  }
  try {
    return recoverAddress(digest, Signature.from(signature));
  } catch (error) {
    throw validationError(
      param,
      `The signature does not recover to an address: ${errorText(error)}`,
      'invalid_signature',
    );
  }
}

/** True when `signature` is a valid signature of the request by `expectedSigner` (any address case). */
export function isSignedBy<K extends RequestKind>(
  kind: K,
  domain: Eip712Domain,
  message: MessageByKind[K],
  signature: string,
  expectedSigner: string,
): boolean {
  try {
    return (
      verifyTypedDataSigner(kind, domain, message, signature).toLowerCase() === expectedSigner.toLowerCase()
    );
  } catch {
    return false;
  }
}

/**
 * The `quoteHash` a Charge binds: keccak256 of the UTF-8 quote code (`refq_...` or a settlement price lock), or the
 * zero hash for a charge without a quote. An empty string counts as no quote: no issued code is empty.
 */
export function quoteHash(code?: string | null): string {
  if (code === undefined || code === null || code === '') return ZeroHash;
  return keccak256(toUtf8Bytes(code));
}

function errorText(error: unknown): string {
  if (error instanceof Error)
    return (error as Error & { shortMessage?: string }).shortMessage ?? error.message;
  return String(error);
}
