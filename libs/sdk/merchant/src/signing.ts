import { Signature, id, type Signer } from 'ethers';
import {
  buildTypedData,
  parseAddress,
  parseCaip19,
  parseCaip2,
  quoteHash,
  stablepayDomain,
  typesFor,
  verifyTypedDataSigner,
  type Eip712Domain,
  type MessageByKind,
  type RequestKind,
  type TypedData,
} from '@stablepay/evm';
import { validationError } from '@stablepay/util';

/**
 * Signer helpers for merchant-signed requests. Each takes the merchant signer (any ethers v6 Signer: a Wallet, a
 * KMS-backed signer, a browser wallet), where the request goes (chain + verifying contract) and the request, and
 * returns the EIP-712 signature to post to the API together with the exact typed data that was signed.
 *
 * Inputs accept what the API returns: integer amounts as strings, the chain as CAIP-2 (`detected_chain`,
 * `subscription.chain`), the token as a CAIP-19 id (`detected_asset`) or an address.
 */

/** An unsigned integer: bigint, a safe-integer number, or a canonical decimal string as the API sends amounts. */
export type UintInput = bigint | number | string;

/** Unix seconds, or a Date. */
export type DeadlineInput = UintInput | Date;

export interface SigningDomain {
  /** CAIP-2 id (`eip155:8453`) or the numeric chain id. */
  readonly chain: string | bigint | number;
  /**
   * The contract that will check the signature: the merchant's SubscriptionManager for charge and cancel, the
   * payment's `deposit_address` for capture, refund, rescue and payer disputes, the StablepayRegistry for merchant
   * changes and revocations, the customer's payout deposit address for a payout refund.
   */
  readonly verifyingContract: string;
}

export interface ChargeRequest extends EpochBound {
  /** 32-byte hex subscription id. */
  readonly subscriptionId: string;
  /** Token smallest units; at most cap_amount and the remaining window budget. */
  readonly amount: UintInput;
  /** The subscription's current `charge_nonce`. */
  readonly nonce: UintInput;
  readonly deadline: DeadlineInput;
  /** The quote code from the charge-quote call (`refq_...` or a price lock); omit for plans without a quote. */
  readonly quoteCode?: string | null;
}

/**
 * Every merchant signature names the merchant's current epoch in the on-chain registry
 * (`StablepayRegistry.merchantEpoch(merchantId)`); revoking bumps it and voids every outstanding signature.
 * The deadline may lie at most MAX_SIGNATURE_HORIZON_SECONDS (7 days) ahead: the contracts refuse a further one.
 */
export interface EpochBound {
  readonly epoch: UintInput;
  readonly deadline: DeadlineInput;
}

export interface CancelSubscriptionRequest extends EpochBound {
  readonly subscriptionId: string;
  /** The subscription's current `charge_nonce`. */
  readonly nonce: UintInput;
}

export interface CaptureRequest extends EpochBound {
  /** The payment's `on_chain_id`. */
  readonly paymentId: string;
  /** The payment's `detected_asset` (CAIP-19) or the token address. */
  readonly token: string;
  /** Token smallest units (`token_amount`). */
  readonly amount: UintInput;
}

export interface RefundRequest extends CaptureRequest {
  /** The payer attested on chain (the payment's payer address): the refund can only go there. */
  readonly payer: string;
}

export interface RescueRequest extends CaptureRequest {
  /** A token other than the payment's own (or the zero address for the native coin). */
  readonly token: string;
  /** Where the stranded funds go. */
  readonly to: string;
}

/**
 * Payouts (beta): return a held payout's deposit from the customer's deposit address (`verifyingContract`, the
 * payout's `deposit_address`) to `to` (POST /payouts/:id/refund_held: `deposit.from`, `deposit.amount`).
 */
export interface PayoutRefundRequest extends EpochBound {
  /** The payout's id (`po_...`; hashed as the service binds it) or its 32-byte on-chain id. */
  readonly payoutId: string;
  /** The payout's token: CAIP-19 id (the payout's `asset`) or address. */
  readonly token: string;
  /** Where the funds go (the payout's `deposit.from`). */
  readonly to: string;
  readonly amount: UintInput;
}

export interface DisputePayerRequest extends EpochBound {
  readonly paymentId: string;
  /** The payer the operator attested, which the merchant disputes. */
  readonly payer: string;
}

export interface MerchantChangeRequest extends EpochBound {
  /** The merchant's 32-byte on-chain id. */
  readonly merchantId: string;
  /** The new signer (may equal the current one when only the settlement address changes). */
  readonly signer: string;
  readonly settlement: string;
}

export interface RevokeAuthorizationsRequest extends EpochBound {
  readonly merchantId: string;
}

export interface SignedRequest<K extends RequestKind> {
  /** 65-byte 0x-hex signature (r ‖ s ‖ v, v = 27/28). */
  readonly signature: string;
  readonly typedData: TypedData<K>;
}

export async function signCharge(
  signer: Signer,
  domain: SigningDomain,
  request: ChargeRequest,
): Promise<SignedRequest<'Charge'>> {
  const d = toDomain(domain);
  return signTyped(signer, 'Charge', d, {
    subscriptionId: bytes32(request.subscriptionId, 'subscriptionId'),
    amount: uint(request.amount, 'amount'),
    nonce: uint(request.nonce, 'nonce'),
    quoteHash: quoteHash(request.quoteCode),
    epoch: uint(request.epoch, 'epoch'),
    deadline: deadline(request.deadline),
  });
}

export async function signCancelSubscription(
  signer: Signer,
  domain: SigningDomain,
  request: CancelSubscriptionRequest,
): Promise<SignedRequest<'CancelSubscription'>> {
  return signTyped(signer, 'CancelSubscription', toDomain(domain), {
    subscriptionId: bytes32(request.subscriptionId, 'subscriptionId'),
    nonce: uint(request.nonce, 'nonce'),
    epoch: uint(request.epoch, 'epoch'),
    deadline: deadline(request.deadline),
  });
}

export async function signCapture(
  signer: Signer,
  domain: SigningDomain,
  request: CaptureRequest,
): Promise<SignedRequest<'Capture'>> {
  const d = toDomain(domain);
  return signTyped(signer, 'Capture', d, paymentFields(d, request));
}

export async function signRefund(
  signer: Signer,
  domain: SigningDomain,
  request: RefundRequest,
): Promise<SignedRequest<'Refund'>> {
  const d = toDomain(domain);
  const { paymentId, token, amount, epoch, deadline: until } = paymentFields(d, request);
  return signTyped(signer, 'Refund', d, {
    paymentId,
    token,
    payer: parseAddress(request.payer, 'payer'),
    amount,
    epoch,
    deadline: until,
  });
}

export async function signRescue(
  signer: Signer,
  domain: SigningDomain,
  request: RescueRequest,
): Promise<SignedRequest<'Rescue'>> {
  const d = toDomain(domain);
  const { paymentId, token, amount, epoch, deadline: until } = paymentFields(d, request);
  return signTyped(signer, 'Rescue', d, {
    paymentId,
    token,
    to: parseAddress(request.to, 'to'),
    amount,
    epoch,
    deadline: until,
  });
}

export async function signDisputePayer(
  signer: Signer,
  domain: SigningDomain,
  request: DisputePayerRequest,
): Promise<SignedRequest<'DisputePayer'>> {
  return signTyped(signer, 'DisputePayer', toDomain(domain), {
    paymentId: bytes32(request.paymentId, 'paymentId'),
    payer: parseAddress(request.payer, 'payer'),
    epoch: uint(request.epoch, 'epoch'),
    deadline: deadline(request.deadline),
  });
}

/** Signed by the CURRENT merchant signer; `domain.verifyingContract` is the StablepayRegistry. */
export async function signMerchantChange(
  signer: Signer,
  domain: SigningDomain,
  request: MerchantChangeRequest,
): Promise<SignedRequest<'MerchantChange'>> {
  return signTyped(signer, 'MerchantChange', toDomain(domain), {
    merchantId: bytes32(request.merchantId, 'merchantId'),
    signer: parseAddress(request.signer, 'signer'),
    settlement: parseAddress(request.settlement, 'settlement'),
    epoch: uint(request.epoch, 'epoch'),
    deadline: deadline(request.deadline),
  });
}

/** `domain.verifyingContract` is the StablepayRegistry. */
export async function signRevokeAuthorizations(
  signer: Signer,
  domain: SigningDomain,
  request: RevokeAuthorizationsRequest,
): Promise<SignedRequest<'RevokeAuthorizations'>> {
  return signTyped(signer, 'RevokeAuthorizations', toDomain(domain), {
    merchantId: bytes32(request.merchantId, 'merchantId'),
    epoch: uint(request.epoch, 'epoch'),
    deadline: deadline(request.deadline),
  });
}

/** Payouts (beta): the merchant's consent to a refund from a customer's deposit address (EIP-712 PayoutRefund). */
export async function signPayoutRefund(
  signer: Signer,
  domain: SigningDomain,
  request: PayoutRefundRequest,
): Promise<SignedRequest<'PayoutRefund'>> {
  const d = toDomain(domain);
  return signTyped(signer, 'PayoutRefund', d, {
    // The rule of `toOnChainId` (@stablepay/contracts), which the service binds the payout id with.
    payoutId: BYTES32.test(request.payoutId) ? request.payoutId.toLowerCase() : id(request.payoutId),
    token: tokenAddress(d, request.token),
    to: parseAddress(request.to, 'to'),
    amount: uint(request.amount, 'amount'),
    epoch: uint(request.epoch, 'epoch'),
    deadline: deadline(request.deadline),
  });
}

async function signTyped<K extends RequestKind>(
  signer: Signer,
  kind: K,
  domain: Eip712Domain,
  message: MessageByKind[K],
): Promise<SignedRequest<K>> {
  const typedData = buildTypedData(kind, domain, message);
  const raw = await signer.signTypedData(domain, typesFor(kind), { ...message });
  // Wallets differ in v (0/1 vs 27/28); the contracts take 27/28 only.
  const signature = Signature.from(raw).serialized;
  // Catch a wallet that signed with another account, or a different payload, before the API refuses it.
  const recovered = verifyTypedDataSigner(kind, domain, message, signature);
  const expected = await signer.getAddress();
  if (recovered.toLowerCase() !== expected.toLowerCase()) {
    throw new Error(`The signature recovers to ${recovered}, not to the signer ${expected}`);
  }
  return { signature, typedData };
}

function toDomain(domain: SigningDomain): Eip712Domain {
  const chainId =
    typeof domain.chain === 'string' ? parseCaip2(domain.chain, 'chain').chainId : BigInt(domain.chain);
  if (chainId <= 0n) throw validationError('chain', 'The chain id must be positive', 'invalid_caip2');
  return stablepayDomain(chainId, parseAddress(domain.verifyingContract, 'verifyingContract'));
}

function paymentFields(domain: Eip712Domain, request: CaptureRequest): MessageByKind['Capture'] {
  return {
    paymentId: bytes32(request.paymentId, 'paymentId'),
    token: tokenAddress(domain, request.token),
    amount: uint(request.amount, 'amount'),
    epoch: uint(request.epoch, 'epoch'),
    deadline: deadline(request.deadline),
  };
}

/** A CAIP-19 token must live on the chain being signed for: a mismatch would sign a request that can never pass. */
function tokenAddress(domain: Eip712Domain, token: string): string {
  if (!token.includes(':')) return parseAddress(token, 'token');
  const asset = parseCaip19(token, 'token');
  if (asset.chain.chainId !== domain.chainId) {
    throw validationError(
      'token',
      `The asset ${asset.caip19} is not on chain eip155:${domain.chainId}`,
      'chain_mismatch',
    );
  }
  return asset.address;
}

const BYTES32 = /^0x[0-9a-fA-F]{64}$/;
const DECIMAL = /^(0|[1-9][0-9]*)$/;
const MAX_UINT256 = (1n << 256n) - 1n;

function bytes32(value: string, param: string): string {
  if (!BYTES32.test(value))
    throw validationError(param, `${param} must be 32 bytes as 0x-prefixed hex`, 'invalid_bytes32');
  return value.toLowerCase();
}

function uint(value: UintInput, param: string): bigint {
  let result: bigint;
  if (typeof value === 'bigint') result = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) result = BigInt(value);
  else if (typeof value === 'string' && DECIMAL.test(value)) result = BigInt(value);
  else
    throw validationError(
      param,
      `${param} must be a non-negative integer (bigint, safe integer or decimal string)`,
      'invalid_integer',
    );
  if (result < 0n || result > MAX_UINT256)
    throw validationError(param, `${param} is out of the uint256 range`, 'invalid_integer');
  return result;
}

function deadline(value: DeadlineInput): bigint {
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) throw validationError('deadline', 'deadline is an invalid Date', 'invalid_integer');
    return uint(Math.floor(ms / 1000), 'deadline');
  }
  return uint(value, 'deadline');
}
