import { loadAggregate } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import {
  evolveSubscription,
  initialSubscriptionState,
  type SubscriptionCreatedData,
  type SubscriptionEvent,
  type SubscriptionState,
  SUBSCRIPTION_CATEGORY,
} from '@stablepay/subscriptions-domain';
import { notFound } from '@stablepay/util';

export interface OwnedSubscription {
  readonly state: SubscriptionState & { readonly created: SubscriptionCreatedData };
  readonly revision: number;
  /** The stream as stored (ids and types): what a retried command already appended. */
  readonly events: ReadonlyArray<{ readonly id: string; readonly type: string; readonly data: unknown }>;
  readonly merchantId: string;
  readonly mode: 'test' | 'live';
}

const SUBSCRIPTION_ID = /^0x[0-9a-f]{64}$/;

/**
 * The merchant's subscription folded from its stream (the write side's truth, not the read model: a charge decides
 * on every fact recorded so far). Another merchant's subscription, or one of the other mode, is 404.
 */
export async function loadOwnedSubscription(
  store: EventStore,
  merchant: { merchantId: string; mode: 'test' | 'live' },
  id: string,
): Promise<OwnedSubscription> {
  const subscriptionId = id.toLowerCase();
  if (!SUBSCRIPTION_ID.test(subscriptionId)) throw notFound('subscription', id);
  const { state, revision, events } = await loadAggregate<SubscriptionState, SubscriptionEvent>(
    store,
    `${SUBSCRIPTION_CATEGORY}-${subscriptionId}`,
    { initialState: initialSubscriptionState, evolve: evolveSubscription },
  );
  const first = events[0];
  const created = state.created;
  if (
    !first ||
    !created ||
    first.metadata.merchantId !== merchant.merchantId ||
    first.metadata.mode !== merchant.mode
  )
    throw notFound('subscription', id);
  return {
    state: { ...state, created },
    revision,
    events,
    merchantId: merchant.merchantId,
    mode: merchant.mode,
  };
}
