import { cannotProcess, conflict, type DomainError, notFound, validationError } from '@stablepay/util';
import {
  parseCurrency,
  parseExternalCustomerId,
  parseIntegerInRange,
  parseMetadata,
  parsePositiveAmount,
  parseRedirectUrl,
  parseSupportedChains,
  SUBSCRIPTION_CHECKOUT_LIMITS as LIMITS,
} from './rules';
import type {
  CancellationReason,
  SubscriptionCheckoutEvent,
  SubscriptionCheckoutObject,
} from './subscription-checkout.events';

/**
 * The SubscriptionCheckout aggregate: a single-use intent that authorizes one subscriber to start one
 * subscription (SPEC Resources > Subscription checkout, States > Subscription checkout).
 *
 *   pending --complete--> completed          (first charge confirmed on chain)
 *   pending --cancel----> cancelled          (merchant PATCH .../cancel, or the customer dismisses the page)
 *   pending --expire----> expired            (expires_at passed; the durable timer issues it)
 *   cancelled|expired --complete--> completed (a subscribe already broadcast confirms late: on-chain truth wins)
 */
export interface SubscriptionCheckoutState {
  readonly exists: boolean;
  /** The latest object (as every event carries it); null before creation. */
  readonly object: SubscriptionCheckoutObject | null;
}

export const initialSubscriptionCheckoutState = (): SubscriptionCheckoutState => ({
  exists: false,
  object: null,
});

export function evolveSubscriptionCheckout(
  state: SubscriptionCheckoutState,
  event: SubscriptionCheckoutEvent,
): SubscriptionCheckoutState {
  switch (event.type) {
    case 'SubscriptionCheckoutCreated.v1':
    case 'SubscriptionCheckoutCancelled.v1':
    case 'SubscriptionCheckoutExpired.v1':
    case 'SubscriptionCheckoutCompleted.v1':
      return { exists: true, object: event.data.object };
  }
}

/** What the merchant sent (types already checked at the edge; values are checked here). */
export interface CreateSubscriptionCheckoutInput {
  readonly price?: string;
  readonly price_currency?: string;
  readonly budget?: string;
  readonly cap?: string;
  readonly period_duration?: number;
  readonly supported_chains?: readonly string[];
  readonly metadata?: Readonly<Record<string, unknown>>;
  readonly external_customer_id?: string;
  readonly success_url?: string;
  readonly cancel_url?: string;
  readonly return_url?: string;
  /** Seconds from creation until the intent expires: default 300, at most 86400 (SPEC Limits), at least 60. */
  readonly expires_in?: number;
}

/** How the merchant settles (SPEC Rules 8). A fiat configuration is complete when every required field is set. */
export type SettlementContext =
  | { readonly mode: 'crypto' }
  | { readonly mode: 'fiat'; readonly currency: string | null; readonly complete: boolean };

export interface CreateContext {
  /** The chains the service supports, with the symbols of their accepted stablecoins. */
  readonly availableChains: ReadonlyArray<{
    readonly caip2: string;
    readonly tokenSymbols: readonly string[];
  }>;
  /** Token symbols the rate source quotes `price_currency` against (empty: the currency cannot be quoted). */
  readonly quotedTokenSymbols: readonly string[];
  readonly settlement: SettlementContext;
}

export type SubscriptionCheckoutCommand =
  | {
      readonly type: 'CreateSubscriptionCheckout';
      readonly id: string;
      readonly onchainId: string;
      readonly businessName: string;
      /** `{hosted_url}/subscribe/:id` */
      readonly checkoutUrl: string;
      readonly input: CreateSubscriptionCheckoutInput;
      readonly context: CreateContext;
      readonly now: Date;
    }
  | { readonly type: 'CancelSubscriptionCheckout'; readonly by: 'merchant' | 'customer'; readonly now: Date }
  | { readonly type: 'ExpireSubscriptionCheckout'; readonly now: Date }
  | {
      readonly type: 'CompleteSubscriptionCheckout';
      readonly subscriber: string;
      readonly chain: string;
      readonly asset: string;
      readonly txHash: string | null;
      readonly now: Date;
    };

export function notPending(object: SubscriptionCheckoutObject, why?: string): DomainError {
  return conflict(
    'subscription_checkout_not_pending',
    `Subscription checkout ${object.id} is ${why ?? object.status}; only a pending subscription checkout can be cancelled.`,
  );
}

const isDue = (object: SubscriptionCheckoutObject, now: Date) =>
  now.getTime() >= Date.parse(object.expires_at);

function requireObject(state: SubscriptionCheckoutState): SubscriptionCheckoutObject {
  if (!state.object) throw notFound('subscription_checkout');
  return state.object;
}

export function decideSubscriptionCheckout(
  command: SubscriptionCheckoutCommand,
  state: SubscriptionCheckoutState,
): SubscriptionCheckoutEvent[] {
  const at = command.now.toISOString();
  switch (command.type) {
    case 'CreateSubscriptionCheckout': {
      if (state.exists)
        throw conflict('subscription_checkout_exists', `Subscription checkout ${command.id} already exists.`);
      const object = validateCreate(command);
      return [{ type: 'SubscriptionCheckoutCreated.v1', data: { object } }];
    }
    case 'CancelSubscriptionCheckout': {
      const object = requireObject(state);
      if (object.status !== 'pending') throw notPending(object);
      if (isDue(object, command.now)) throw notPending(object, 'expired');
      const reason: CancellationReason =
        command.by === 'merchant' ? 'merchant_cancelled' : 'customer_dismissed';
      return [
        {
          type: 'SubscriptionCheckoutCancelled.v1',
          data: {
            object: {
              ...object,
              status: 'cancelled',
              cancelled_at: at,
              cancellation_reason: reason,
              updated_at: at,
            },
            cancelledBy: command.by,
          },
        },
      ];
    }
    case 'ExpireSubscriptionCheckout': {
      const object = requireObject(state);
      // Idempotent: the timer may fire twice, or race a cancel or a completion; only a due pending intent expires.
      if (object.status !== 'pending' || !isDue(object, command.now)) return [];
      return [
        {
          type: 'SubscriptionCheckoutExpired.v1',
          data: { object: { ...object, status: 'expired', expired_at: at, updated_at: at } },
        },
      ];
    }
    case 'CompleteSubscriptionCheckout': {
      const object = requireObject(state);
      // Completed fires once per intent.
      if (object.status === 'completed') return [];
      return [
        {
          type: 'SubscriptionCheckoutCompleted.v1',
          data: {
            object: {
              ...object,
              status: 'completed',
              subscriber: command.subscriber,
              completed_at: at,
              updated_at: at,
            },
            chain: command.chain,
            asset: command.asset,
            txHash: command.txHash,
          },
        },
      ];
    }
  }
}

/** Every create rule of SPEC, in the order a merchant fixes them: 400s (field by field), then the 422s. */
function validateCreate(
  command: Extract<SubscriptionCheckoutCommand, { type: 'CreateSubscriptionCheckout' }>,
): SubscriptionCheckoutObject {
  const input = command.input;
  if (input.price === undefined)
    throw validationError(
      'price',
      'price is required: the recurring per-cycle amount in minor units of price_currency.',
    );
  const price = parsePositiveAmount(input.price, 'price');
  if (input.price_currency === undefined)
    throw validationError('price_currency', 'price_currency is required: an ISO-4217 code such as ARS.');
  const currency = parseCurrency(input.price_currency);
  const givenBudget = input.budget === undefined ? undefined : parsePositiveAmount(input.budget, 'budget');
  const givenCap = input.cap === undefined ? undefined : parsePositiveAmount(input.cap, 'cap');

  // SPEC Rules 1-2: budget defaults to 10 x price; cap defaults to the budget (given or derived); price <= cap <= budget.
  const budget = givenBudget ?? price * LIMITS.defaultBudgetMultiplier;
  if (givenBudget === undefined && budget.toString().length > LIMITS.maxAmountDigits) {
    throw validationError(
      'price',
      `price is too large: its default budget (10 x price) must have at most ${LIMITS.maxAmountDigits} digits.`,
    );
  }
  const cap = givenCap ?? budget;
  if (price > cap) {
    throw givenCap !== undefined
      ? validationError('cap', `cap (${cap}) must be at least price (${price}): price <= cap <= budget.`)
      : validationError(
          'budget',
          `budget (${budget}) must be at least price (${price}): price <= cap <= budget.`,
        );
  }
  if (cap > budget) {
    throw validationError(
      'cap',
      givenBudget !== undefined
        ? `cap (${cap}) must not exceed budget (${budget}): price <= cap <= budget.`
        : `cap (${cap}) must not exceed budget, which defaults to 10 x price (${budget}): price <= cap <= budget.`,
    );
  }

  const period =
    input.period_duration === undefined
      ? LIMITS.defaultPeriodSeconds
      : parseIntegerInRange(
          input.period_duration,
          'period_duration',
          LIMITS.minPeriodSeconds,
          LIMITS.maxPeriodSeconds,
          'seconds',
        );
  const expiresIn =
    input.expires_in === undefined
      ? LIMITS.defaultExpiresInSeconds
      : parseIntegerInRange(
          input.expires_in,
          'expires_in',
          LIMITS.minExpiresInSeconds,
          LIMITS.maxExpiresInSeconds,
          'seconds',
        );
  const supportedChains = parseSupportedChains(
    input.supported_chains,
    command.context.availableChains.map((c) => c.caip2),
  );
  const metadata = parseMetadata(input.metadata);
  const externalCustomerId = parseExternalCustomerId(input.external_customer_id);
  const successUrl = parseRedirectUrl(input.success_url, 'success_url');
  const cancelUrl = parseRedirectUrl(input.cancel_url, 'cancel_url');
  const returnUrl = parseRedirectUrl(input.return_url, 'return_url');

  // SPEC Rules 8, then the 422s in order: settlement configuration, its currency, and whether the currency can be priced.
  const settlement = command.context.settlement;
  if (settlement.mode === 'fiat') {
    if (!settlement.complete || settlement.currency === null) {
      throw cannotProcess(
        'fiat_settlement_required',
        'This business settles in fiat and has no complete fiat settlement configuration: set it with PUT /payments/settlement first.',
      );
    }
    if (currency !== settlement.currency) {
      throw cannotProcess(
        'currency_mismatch',
        `This business settles in ${settlement.currency}; price_currency must be ${settlement.currency}.`,
        'price_currency',
      );
    }
  }
  const quoted = new Set(command.context.quotedTokenSymbols.map((s) => s.toUpperCase()));
  const payable = command.context.availableChains.some(
    (chain) =>
      supportedChains.includes(chain.caip2) &&
      chain.tokenSymbols.some((symbol) => quoted.has(symbol.toUpperCase())),
  );
  if (!payable) {
    throw cannotProcess(
      'price_currency_not_quotable',
      quoted.size === 0
        ? `The rate source cannot quote ${currency}, so the price cannot be converted to a stablecoin amount.`
        : `The rate source quotes ${currency} only against ${[...quoted].join(', ')}, which no chain in supported_chains offers.`,
      'price_currency',
    );
  }

  const at = command.now.toISOString();
  return {
    object: 'subscription_checkout',
    id: command.id,
    status: 'pending',
    onchain_id: command.onchainId,
    business_name: command.businessName,
    subscriber: null,
    external_customer_id: externalCustomerId,
    price: price.toString(),
    price_currency: currency,
    period_duration: period,
    cap: cap.toString(),
    budget: budget.toString(),
    checkout_url: command.checkoutUrl,
    success_url: successUrl,
    cancel_url: cancelUrl,
    return_url: returnUrl,
    metadata,
    supported_chains: supportedChains,
    expires_at: new Date(command.now.getTime() + expiresIn * 1000).toISOString(),
    created_at: at,
    updated_at: at,
    completed_at: null,
    cancelled_at: null,
    expired_at: null,
    cancellation_reason: null,
  };
}

export const subscriptionCheckoutDecider = {
  initialState: initialSubscriptionCheckoutState,
  evolve: evolveSubscriptionCheckout,
  decide: decideSubscriptionCheckout,
};
