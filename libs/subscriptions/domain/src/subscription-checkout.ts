import { cannotProcess, conflict, type DomainError, notFound, validationError } from '@stablepay/util';
import {
  parseCurrency,
  parseExternalCustomerId,
  parseIntegerInRange,
  parsePositiveAmount,
  parseRedirectUrl,
  parseSubscriptionCheckoutMetadata,
  parseSupportedChains,
  SUBSCRIPTION_CHECKOUT_LIMITS as LIMITS,
} from './rules';
import type {
  CancellationReason,
  CancelledBy,
  SubscriptionCheckoutCreatedData,
  SubscriptionCheckoutEvent,
  SubscriptionCheckoutObject,
  SubscriptionCheckoutStatus,
} from './subscription-checkout.events';
import type { SubscriptionChargeSucceededData, SubscriptionCreatedData } from './subscription.events';

/**
 * The SubscriptionCheckout aggregate: a single-use intent that authorizes one subscriber to start one
 * subscription (SPEC Resources > Subscription checkout, States > Subscription checkout).
 *
 *   pending --complete--> completed          (first charge confirmed on chain)
 *   pending --cancel----> cancelled          (merchant PATCH .../cancel, or the customer dismisses the page)
 *   pending --expire----> expired            (expires_at passed; the durable timer issues it)
 *   cancelled|expired --complete--> completed (a subscribe already broadcast confirms late: on-chain truth wins)
 */
export interface SubscriptionCheckout {
  /** What creation decided; never changes afterwards. */
  readonly created: SubscriptionCheckoutCreatedData;
  readonly status: SubscriptionCheckoutStatus;
  readonly subscriber: string | null;
  readonly cancelledBy: CancelledBy | null;
  readonly cancelledAt: string | null;
  readonly expiredAt: string | null;
  readonly completedAt: string | null;
  /** When the latest event happened. */
  readonly updatedAt: string;
  /**
   * While completed: the subscribe transaction the completion rests on, and the status the intent had before it (what
   * it returns to when a reorg takes that transaction out).
   */
  readonly completion: {
    readonly txHash: string | null;
    readonly before: Exclude<SubscriptionCheckoutStatus, 'completed'>;
    readonly subscriber: string | null;
  } | null;
}

export interface SubscriptionCheckoutState {
  /** Null before creation. */
  readonly checkout: SubscriptionCheckout | null;
}

export const initialSubscriptionCheckoutState = (): SubscriptionCheckoutState => ({ checkout: null });

/** Builds state from facts (events of the newest version; older ones arrive upcast). */
export function evolveSubscriptionCheckout(
  state: SubscriptionCheckoutState,
  event: SubscriptionCheckoutEvent,
): SubscriptionCheckoutState {
  if (event.type === 'SubscriptionCheckoutCreated.v2') {
    const created = event.data;
    return {
      checkout: {
        created,
        status: 'pending',
        subscriber: null,
        cancelledBy: null,
        cancelledAt: null,
        expiredAt: null,
        completedAt: null,
        updatedAt: created.createdAt,
        completion: null,
      },
    };
  }
  const checkout = state.checkout;
  // A stream always starts with its creation; anything else first is a corrupted stream, not a state.
  if (!checkout) throw new Error(`${event.type} before SubscriptionCheckoutCreated`);
  switch (event.type) {
    case 'SubscriptionCheckoutCancelled.v2':
      return {
        checkout: {
          ...checkout,
          status: 'cancelled',
          cancelledBy: event.data.by,
          cancelledAt: event.data.cancelledAt,
          updatedAt: event.data.cancelledAt,
        },
      };
    case 'SubscriptionCheckoutExpired.v2':
      return {
        checkout: {
          ...checkout,
          status: 'expired',
          expiredAt: event.data.expiredAt,
          updatedAt: event.data.expiredAt,
        },
      };
    case 'SubscriptionCheckoutCompleted.v3':
      return {
        checkout: {
          ...checkout,
          status: 'completed',
          subscriber: event.data.subscriber,
          completedAt: event.data.completedAt,
          updatedAt: event.data.completedAt,
          completion: {
            txHash: event.data.txHash ?? event.data.subscription?.txHash ?? null,
            before: checkout.status === 'completed' ? 'pending' : checkout.status,
            subscriber: checkout.subscriber,
          },
        },
      };
    case 'SubscriptionCheckoutCompletionRetracted.v1':
      return {
        checkout: {
          ...checkout,
          status: checkout.completion?.before ?? 'pending',
          subscriber: checkout.completion?.subscriber ?? null,
          completedAt: null,
          updatedAt: event.data.retractedAt,
          completion: null,
        },
      };
  }
}

/** The state after `events` (a stream, or its prefix up to one event: the aggregate as of that event). */
export const foldSubscriptionCheckout = (
  events: readonly SubscriptionCheckoutEvent[],
): SubscriptionCheckoutState => events.reduce(evolveSubscriptionCheckout, initialSubscriptionCheckoutState());

const REASON_BY_CANCELLER: Readonly<Record<CancelledBy, CancellationReason>> = {
  merchant: 'merchant_cancelled',
  customer: 'customer_dismissed',
};

/**
 * The API object is a projection of state (SPEC Resources > Subscription checkout, without the API-only
 * `subscription_options`): what the read model stores and what a webhook's `data.object` shows.
 */
export function subscriptionCheckoutObject(checkout: SubscriptionCheckout): SubscriptionCheckoutObject {
  const c = checkout.created;
  return {
    object: 'subscription_checkout',
    id: c.id,
    status: checkout.status,
    onchain_id: c.onchainId,
    business_name: c.businessName,
    subscriber: checkout.subscriber,
    external_customer_id: c.externalCustomerId,
    price: c.price,
    price_currency: c.priceCurrency,
    period_duration: c.periodDuration,
    cap: c.cap,
    budget: c.budget,
    checkout_url: c.checkoutUrl,
    success_url: c.successUrl,
    cancel_url: c.cancelUrl,
    return_url: c.returnUrl,
    metadata: { ...c.metadata },
    supported_chains: [...c.supportedChains],
    expires_at: c.expiresAt,
    created_at: c.createdAt,
    updated_at: checkout.updatedAt,
    completed_at: checkout.completedAt,
    cancelled_at: checkout.cancelledAt,
    expired_at: checkout.expiredAt,
    cancellation_reason: checkout.cancelledBy ? REASON_BY_CANCELLER[checkout.cancelledBy] : null,
  };
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
  /**
   * What subscribing will need of the merchant on chain, when this deployment deploys subscription managers (an
   * RPC URL on an offered chain, the factory and the operator key); absent: nothing on chain to check. Subscribe
   * deploys the merchant's manager with its declared pauser and registers its signer and settlement address.
   */
  readonly merchantOnChain?: {
    readonly signer: boolean;
    readonly pauser: boolean;
    /**
     * Chains whose registry holds another signer or settlement address than the settings (GET /settings
     * `change_requires_merchant_signature`): subscribe is refused there until the merchant's MerchantChange lands.
     */
    readonly changePendingChains?: readonly string[];
  };
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
  | { readonly type: 'CancelSubscriptionCheckout'; readonly by: CancelledBy; readonly now: Date }
  | { readonly type: 'ExpireSubscriptionCheckout'; readonly now: Date }
  | {
      readonly type: 'CompleteSubscriptionCheckout';
      readonly subscriber: string;
      readonly chain: string;
      readonly asset: string;
      readonly txHash: string | null;
      /** The subscription's creation and first charge as recorded (null only where a caller has none). */
      readonly subscription?: SubscriptionCreatedData | null;
      readonly firstCharge?: SubscriptionChargeSucceededData | null;
      readonly now: Date;
    }
  | {
      /** A reorg took out the subscribe transaction `txHash` (the indexer retracted its SubscriptionCreated). */
      readonly type: 'RetractSubscriptionCheckoutCompletion';
      readonly txHash: string;
      readonly now: Date;
    };

export function notPending(checkout: SubscriptionCheckout, why?: string): DomainError {
  return conflict(
    'subscription_checkout_not_pending',
    `Subscription checkout ${checkout.created.id} is ${why ?? checkout.status}; only a pending subscription checkout can be cancelled.`,
  );
}

const isDue = (checkout: SubscriptionCheckout, now: Date) =>
  now.getTime() >= Date.parse(checkout.created.expiresAt);

function requireCheckout(state: SubscriptionCheckoutState): SubscriptionCheckout {
  if (!state.checkout) throw notFound('subscription_checkout');
  return state.checkout;
}

export function decideSubscriptionCheckout(
  command: SubscriptionCheckoutCommand,
  state: SubscriptionCheckoutState,
): SubscriptionCheckoutEvent[] {
  const at = command.now.toISOString();
  switch (command.type) {
    case 'CreateSubscriptionCheckout': {
      if (state.checkout)
        throw conflict('subscription_checkout_exists', `Subscription checkout ${command.id} already exists.`);
      return [{ type: 'SubscriptionCheckoutCreated.v2', data: validateCreate(command) }];
    }
    case 'CancelSubscriptionCheckout': {
      const checkout = requireCheckout(state);
      if (checkout.status !== 'pending') throw notPending(checkout);
      if (isDue(checkout, command.now)) throw notPending(checkout, 'expired');
      return [{ type: 'SubscriptionCheckoutCancelled.v2', data: { by: command.by, cancelledAt: at } }];
    }
    case 'ExpireSubscriptionCheckout': {
      const checkout = requireCheckout(state);
      // Idempotent: the timer may fire twice, or race a cancel or a completion; only a due pending intent expires.
      if (checkout.status !== 'pending' || !isDue(checkout, command.now)) return [];
      return [{ type: 'SubscriptionCheckoutExpired.v2', data: { expiredAt: at } }];
    }
    case 'CompleteSubscriptionCheckout': {
      const checkout = requireCheckout(state);
      // Completed fires once per intent.
      if (checkout.status === 'completed') return [];
      return [
        {
          type: 'SubscriptionCheckoutCompleted.v3',
          data: {
            subscriber: command.subscriber,
            chain: command.chain,
            asset: command.asset,
            txHash: command.txHash,
            completedAt: at,
            subscription: command.subscription ?? null,
            firstCharge: command.firstCharge ?? null,
          },
        },
      ];
    }
    case 'RetractSubscriptionCheckoutCompletion': {
      const checkout = requireCheckout(state);
      // Only a completion that rests on that transaction is undone (a repeat, or another transaction, says nothing).
      const tx = checkout.completion?.txHash;
      if (checkout.status !== 'completed' || !tx || tx.toLowerCase() !== command.txHash.toLowerCase())
        return [];
      return [
        {
          type: 'SubscriptionCheckoutCompletionRetracted.v1',
          data: { txHash: tx, retractedAt: at },
        },
      ];
    }
  }
}

/** Every create rule of SPEC, in the order a merchant fixes them: 400s (field by field), then the 422s. */
function validateCreate(
  command: Extract<SubscriptionCheckoutCommand, { type: 'CreateSubscriptionCheckout' }>,
): SubscriptionCheckoutCreatedData {
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
  const metadata = parseSubscriptionCheckoutMetadata(input.metadata);
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

  // Refused here, to the merchant, rather than to the customer at Subscribe (where the manager is deployed).
  const onChain = command.context.merchantOnChain;
  if (onChain && !onChain.signer) {
    throw cannotProcess(
      'merchant_signer_required',
      'The merchant has no signer and settlement address yet: a subscription could never be charged or cancelled. Register them with POST /settings (merchant_signer, settlement_address) first.',
      'merchant_signer',
    );
  }
  if (onChain && !onChain.pauser) {
    throw cannotProcess(
      'merchant_pauser_required',
      'The merchant has not declared a pause authority: it is bound into the subscription manager deployed at the first subscribe. Declare it with POST /settings/pauser (GET /settings/pauser gives the message to sign) first.',
      'merchant_pauser',
    );
  }
  const held = supportedChains.filter((c) => onChain?.changePendingChains?.includes(c));
  if (held.length > 0) {
    throw conflict(
      'merchant_change_pending',
      `The merchant's signer or settlement address changed in its settings but not on ${held.join(', ')}, which would pay the previous settlement address: sign a MerchantChange with the signer the chain holds and send it with POST /settings/merchant-change (one per chain), or leave those chains out of supported_chains. GET /settings shows chain_registrations.`,
      'supported_chains',
    );
  }

  return {
    id: command.id,
    onchainId: command.onchainId,
    businessName: command.businessName,
    checkoutUrl: command.checkoutUrl,
    price: price.toString(),
    priceCurrency: currency,
    cap: cap.toString(),
    budget: budget.toString(),
    periodDuration: period,
    supportedChains,
    metadata,
    externalCustomerId,
    successUrl,
    cancelUrl,
    returnUrl,
    expiresAt: new Date(command.now.getTime() + expiresIn * 1000).toISOString(),
    createdAt: command.now.toISOString(),
  };
}

export const subscriptionCheckoutDecider = {
  initialState: initialSubscriptionCheckoutState,
  evolve: evolveSubscriptionCheckout,
  decide: decideSubscriptionCheckout,
};
