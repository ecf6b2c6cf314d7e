import { topicForCategory } from '@stablepay/event-bus';
import {
  BENEFICIARY_CATEGORY,
  beneficiaryDecider,
  type BeneficiaryEvent,
  beneficiaryObject,
  CUSTOMER_CATEGORY,
  CUSTOMER_WEBHOOK_BY_EVENT,
  customerDecider,
  type CustomerEvent,
  customerObject,
  type CustomerState,
  PAYOUT_CATEGORY,
  PAYOUT_WEBHOOK_BY_EVENT,
  payoutDecider,
  type PayoutEvent,
  payoutObject,
  type PayoutState,
} from '@stablepay/payouts-domain';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

export const CUSTOMER_TOPIC = topicForCategory(CUSTOMER_CATEGORY);
export const BENEFICIARY_TOPIC = topicForCategory(BENEFICIARY_CATEGORY);
export const PAYOUT_TOPIC = topicForCategory(PAYOUT_CATEGORY);

const KNOWN_CUSTOMER = new Set(Object.keys(CUSTOMER_WEBHOOK_BY_EVENT));
const KNOWN_PAYOUT = new Set(Object.keys(PAYOUT_WEBHOOK_BY_EVENT));

/** Folds a stream's events from its first; a type this release does not know (a newer writer's) changes nothing. */
function fold<S, E extends StoredEvent>(
  history: readonly StoredEvent[],
  decider: { initialState: () => S; evolve: (s: S, e: E) => S },
  known: (type: string) => boolean,
  what: string,
): S {
  if (history[0] === undefined) throw new Error(`a ${what} stream must start with its creation`);
  return history.reduce((s, e) => (known(e.type) ? decider.evolve(s, e as E) : s), decider.initialState());
}

export const foldCustomer = (history: readonly StoredEvent[]): CustomerState =>
  fold<CustomerState, CustomerEvent>(history, customerDecider, (t) => KNOWN_CUSTOMER.has(t), 'customer');
export const foldPayout = (history: readonly StoredEvent[]): PayoutState =>
  fold<PayoutState, PayoutEvent>(history, payoutDecider, (t) => KNOWN_PAYOUT.has(t), 'payout');

/** The API object as of the last event of `history`: the read model's row and the webhook's data.object alike. */
export function objectAsOf(category: string, history: readonly StoredEvent[]) {
  if (category === CUSTOMER_CATEGORY) return customerObject(foldCustomer(history));
  if (category === PAYOUT_CATEGORY) return payoutObject(foldPayout(history));
  if (category === BENEFICIARY_CATEGORY)
    return beneficiaryObject(
      fold(history, beneficiaryDecider, (t) => t === 'BeneficiaryCreated.v2', 'beneficiary') as ReturnType<
        typeof beneficiaryDecider.initialState
      >,
    );
  throw new Error(`not a payouts stream category: ${category}`);
}

export type { BeneficiaryEvent };
