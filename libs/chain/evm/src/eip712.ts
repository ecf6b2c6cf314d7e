/**
 * EIP-712 typed data for every merchant-signed request: one definition used by the merchant SDK (signing),
 * by API preflight (verification) and by the contracts' tests (the Solidity typehashes must match these).
 *
 * The domain binds the chain id and the verifying contract: for subscription requests the merchant's
 * SubscriptionManager, for payment requests the payment's own deposit contract, for merchant-key management the
 * StablepayRegistry. Each merchant message binds a nonce and/or is burned on use, names the merchant's registry
 * `epoch` (`registry.merchantEpoch(merchantId)`: the merchant revokes every outstanding signature by bumping it)
 * and a deadline at most MAX_SIGNATURE_HORIZON_SECONDS ahead (enforced on chain), so a signature can be used once,
 * on one chain, against one contract, for a bounded time, and can be revoked.
 */

/** The contracts refuse a deadline further than this beyond the block time (`DeadlineTooFar`). */
export const MAX_SIGNATURE_HORIZON_SECONDS = 7n * 24n * 3600n;
export const EIP712_DOMAIN_NAME = 'Stablepay';
export const EIP712_DOMAIN_VERSION = '1';

export interface Eip712Domain {
  readonly name: string;
  readonly version: string;
  readonly chainId: bigint;
  readonly verifyingContract: string;
}

export function stablepayDomain(chainId: bigint | number, verifyingContract: string): Eip712Domain {
  return {
    name: EIP712_DOMAIN_NAME,
    version: EIP712_DOMAIN_VERSION,
    chainId: BigInt(chainId),
    verifyingContract,
  };
}

type Field = { readonly name: string; readonly type: string };

/** Merchant signer -> SubscriptionManager.charge. quoteHash binds the quote (refq_/price lock) or is zero. */
export const CHARGE_TYPES: Record<'Charge', Field[]> = {
  Charge: [
    { name: 'subscriptionId', type: 'bytes32' },
    { name: 'amount', type: 'uint256' },
    { name: 'nonce', type: 'uint256' },
    { name: 'quoteHash', type: 'bytes32' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/** Merchant signer -> SubscriptionManager.cancel. nonce is the subscription's current charge nonce. */
export const CANCEL_SUBSCRIPTION_TYPES: Record<'CancelSubscription', Field[]> = {
  CancelSubscription: [
    { name: 'subscriptionId', type: 'bytes32' },
    { name: 'nonce', type: 'uint256' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/**
 * Operator (service) signer -> SubscriptionManager.subscribe: the terms the subscriber signs up to, converted to
 * the chosen token at subscribe time. The subscriber submits it from their own wallet, and only that wallet can:
 * `subscriber` binds it (the contract requires msg.sender == subscriber), so a copy seen in the mempool cannot be
 * front-run from another wallet.
 */
export const SUBSCRIBE_AUTHORIZATION_TYPES: Record<'SubscribeAuthorization', Field[]> = {
  SubscribeAuthorization: [
    { name: 'subscriptionId', type: 'bytes32' },
    { name: 'subscriber', type: 'address' },
    { name: 'token', type: 'address' },
    { name: 'cap', type: 'uint256' },
    { name: 'budget', type: 'uint256' },
    { name: 'periodDuration', type: 'uint256' },
    { name: 'firstChargeAmount', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/** Merchant signer -> deposit contract: move escrowed funds to the settlement address bound at deployment. */
export const CAPTURE_TYPES: Record<'Capture', Field[]> = {
  Capture: [
    { name: 'paymentId', type: 'bytes32' },
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/**
 * Merchant signer -> deposit contract: return escrowed funds to the payer. `payer` must equal the payer attested on
 * chain: by signing it the merchant consents to the destination (the operator key alone cannot redirect a refund).
 */
export const REFUND_TYPES: Record<'Refund', Field[]> = {
  Refund: [
    { name: 'paymentId', type: 'bytes32' },
    { name: 'token', type: 'address' },
    { name: 'payer', type: 'address' },
    { name: 'amount', type: 'uint256' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/**
 * Merchant signer -> a payout customer's deposit contract (PayoutDeposit): return one held payout's `amount` of
 * `token` to `to` (the payout's sender, payout.refunded) instead of sweeping it to the off-ramp, once per payout.
 * Operator-submitted. The deposit address (the verifying contract) already binds the customer.
 */
export const PAYOUT_REFUND_TYPES: Record<'PayoutRefund', Field[]> = {
  PayoutRefund: [
    { name: 'payoutId', type: 'bytes32' },
    { name: 'token', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'amount', type: 'uint256' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/**
 * Merchant signer -> deposit contract: move stranded funds that are not the payer's (a token other than the payment
 * token, or the native coin as the zero address) to `to`.
 */
export const RESCUE_TYPES: Record<'Rescue', Field[]> = {
  Rescue: [
    { name: 'paymentId', type: 'bytes32' },
    { name: 'token', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'amount', type: 'uint256' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/**
 * Merchant signer -> deposit contract: the payer the operator attested is wrong; clears it (within the deposit's
 * challenge period) so no payer-owned funds move until the registry admin attests the right one.
 */
export const DISPUTE_PAYER_TYPES: Record<'DisputePayer', Field[]> = {
  DisputePayer: [
    { name: 'paymentId', type: 'bytes32' },
    { name: 'payer', type: 'address' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/** Current merchant signer -> StablepayRegistry: rotate to a new signer and/or settlement address at once. */
export const MERCHANT_CHANGE_TYPES: Record<'MerchantChange', Field[]> = {
  MerchantChange: [
    { name: 'merchantId', type: 'bytes32' },
    { name: 'signer', type: 'address' },
    { name: 'settlement', type: 'address' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

/** Merchant signer -> StablepayRegistry: revoke every outstanding merchant signature (bumps the epoch). */
export const REVOKE_AUTHORIZATIONS_TYPES: Record<'RevokeAuthorizations', Field[]> = {
  RevokeAuthorizations: [
    { name: 'merchantId', type: 'bytes32' },
    { name: 'epoch', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

export interface ChargeMessage {
  readonly subscriptionId: string;
  readonly amount: bigint;
  readonly nonce: bigint;
  readonly quoteHash: string;
  /** The merchant's registry epoch (`registry.merchantEpoch(merchantId)`). */
  readonly epoch: bigint;
  readonly deadline: bigint;
}
export interface CancelSubscriptionMessage {
  readonly subscriptionId: string;
  readonly nonce: bigint;
  readonly epoch: bigint;
  readonly deadline: bigint;
}
export interface SubscribeAuthorizationMessage {
  readonly subscriptionId: string;
  /** The wallet that must submit `subscribe` (and pays the first charge). */
  readonly subscriber: string;
  readonly token: string;
  readonly cap: bigint;
  readonly budget: bigint;
  readonly periodDuration: bigint;
  readonly firstChargeAmount: bigint;
  readonly deadline: bigint;
}
export interface CaptureMessage {
  readonly paymentId: string;
  readonly token: string;
  readonly amount: bigint;
  readonly epoch: bigint;
  readonly deadline: bigint;
}
export interface RefundMessage {
  readonly paymentId: string;
  readonly token: string;
  /** The payer attested on chain (`deposit.payment().payer`). */
  readonly payer: string;
  readonly amount: bigint;
  readonly epoch: bigint;
  readonly deadline: bigint;
}
export interface PayoutRefundMessage {
  /** The payout's bytes32 (`toOnChainId(po_...)`): the deposit refunds a payout once. */
  readonly payoutId: string;
  readonly token: string;
  readonly to: string;
  readonly amount: bigint;
  readonly epoch: bigint;
  readonly deadline: bigint;
}
export interface RescueMessage {
  readonly paymentId: string;
  readonly token: string;
  readonly to: string;
  readonly amount: bigint;
  readonly epoch: bigint;
  readonly deadline: bigint;
}
export interface DisputePayerMessage {
  readonly paymentId: string;
  readonly payer: string;
  readonly epoch: bigint;
  readonly deadline: bigint;
}
export interface MerchantChangeMessage {
  readonly merchantId: string;
  readonly signer: string;
  readonly settlement: string;
  readonly epoch: bigint;
  readonly deadline: bigint;
}
export interface RevokeAuthorizationsMessage {
  readonly merchantId: string;
  readonly epoch: bigint;
  readonly deadline: bigint;
}
