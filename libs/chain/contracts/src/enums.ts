/** PaymentDeposit.Method: what deploying the deposit contract does with the funding amount. */
export const PaymentMethod = { DIRECT: 0, TWO_STEP: 1, NONE: 2 } as const;
export type PaymentMethod = (typeof PaymentMethod)[keyof typeof PaymentMethod];

/** SubscriptionManager.Status as returned in getSubscription().status. */
export const SubscriptionStatus = { None: 0n, Active: 1n, Cancelled: 2n } as const;

/** SubscriptionCancelled.cancelledBy */
export const Canceller = { Merchant: 0n, Subscriber: 1n } as const;

/** Paused / Unpaused .role */
export const PauserRole = { Merchant: 0n, Operator: 1n } as const;

/** The SPEC's minimum period_duration, enforced on chain. */
export const MIN_PERIOD_DURATION_SECONDS = 3600;

/** The on-chain failure names SPEC.md stores in a charge's failure_reason. */
export const CHARGE_FAILURE_ERRORS = [
  'InsufficientBalance',
  'InsufficientAllowance',
  'ChargeAmountExceedsCap',
  'BudgetExceeded',
  'SubscriptionNotActive',
] as const;
export type ChargeFailureError = (typeof CHARGE_FAILURE_ERRORS)[number];

/**
 * Not a failure: the charge with that nonce already happened (another submitter of the same merchant signature got
 * there first, or an earlier attempt of ours landed). The service looks up SubscriptionCharged for the nonce and
 * records that charge; it never marks the charge failed nor pauses the subscription for this error.
 */
export const CHARGE_ALREADY_LANDED_ERROR = 'NonceAlreadyUsed' as const;
