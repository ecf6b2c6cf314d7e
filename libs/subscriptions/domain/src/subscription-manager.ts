import { conflict } from '@stablepay/util';

/**
 * The SubscriptionManager of one merchant on one chain, as the chain says it is (`subscriptionManager-<caip2>:<address>`):
 * the incident brake its two pausers hold (SPEC Resources > Pause authority: the merchant pauser and the operator's own).
 * Either flag blocks `subscribe` and `charge` on chain (`ManagerPaused`), so the charge preflight refuses while it is on
 * (`manager_paused`). Not the dunning `paused` of a subscription (docs/subscriptions.md, Manager events).
 */
export type PauserRole = 'merchant' | 'operator';

export type SubscriptionManagerPaused = {
  type: 'SubscriptionManagerPaused.v1';
  data: { role: PauserRole; account: string; txHash: string; pausedAt: string };
};
export type SubscriptionManagerUnpaused = {
  type: 'SubscriptionManagerUnpaused.v1';
  data: { role: PauserRole; account: string; txHash: string; unpausedAt: string };
};
/** A reorg orphaned the block of a recorded pause or unpause: folded out. */
export type SubscriptionManagerPauseRetracted = {
  type: 'SubscriptionManagerPauseRetracted.v1';
  data: { txHash: string; retractedAt: string };
};
export type SubscriptionManagerEvent =
  SubscriptionManagerPaused | SubscriptionManagerUnpaused | SubscriptionManagerPauseRetracted;

export const SUBSCRIPTION_MANAGER_CATEGORY = 'subscriptionManager';
export const subscriptionManagerStreamId = (chain: string, address: string): string =>
  `${SUBSCRIPTION_MANAGER_CATEGORY}-${chain}:${address.toLowerCase()}`;

export interface SubscriptionManagerState {
  /** The pause and unpause logs still on chain, in order. */
  readonly changes: ReadonlyArray<{
    readonly txHash: string;
    readonly role: PauserRole;
    readonly paused: boolean;
  }>;
}

export const initialSubscriptionManagerState = (): SubscriptionManagerState => ({ changes: [] });

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

export function evolveSubscriptionManager(
  state: SubscriptionManagerState,
  event: SubscriptionManagerEvent,
): SubscriptionManagerState {
  switch (event.type) {
    case 'SubscriptionManagerPaused.v1':
    case 'SubscriptionManagerUnpaused.v1':
      return {
        changes: [
          ...state.changes,
          {
            txHash: event.data.txHash,
            role: event.data.role,
            paused: event.type === 'SubscriptionManagerPaused.v1',
          },
        ],
      };
    case 'SubscriptionManagerPauseRetracted.v1':
      return { changes: state.changes.filter((c) => !same(c.txHash, event.data.txHash)) };
  }
}

/** The roles whose pause flag is on (the latest recorded change of each role). */
export function pausedBy(state: SubscriptionManagerState): PauserRole[] {
  const latest = new Map<PauserRole, boolean>();
  for (const c of state.changes) latest.set(c.role, c.paused);
  return (['merchant', 'operator'] as const).filter((role) => latest.get(role) === true);
}

export type SubscriptionManagerCommand =
  | {
      readonly type: 'RecordManagerPauseChange';
      readonly paused: boolean;
      /** The log's `role` argument: 0 merchant, 1 operator (PauserRole in the contract). */
      readonly role: string;
      readonly account: string;
      readonly txHash: string;
      readonly at: string;
    }
  | { readonly type: 'RetractManagerPauseChange'; readonly txHash: string; readonly now: Date };

export function decideSubscriptionManager(
  command: SubscriptionManagerCommand,
  state: SubscriptionManagerState,
): SubscriptionManagerEvent[] {
  const recorded = state.changes.some((c) => same(c.txHash, command.txHash));
  if (command.type === 'RetractManagerPauseChange')
    return recorded
      ? [
          {
            type: 'SubscriptionManagerPauseRetracted.v1',
            data: { txHash: command.txHash, retractedAt: command.now.toISOString() },
          },
        ]
      : [];
  if (recorded) return [];
  if (command.role !== '0' && command.role !== '1')
    throw conflict('unknown_pauser_role', `Pauser role ${command.role} is not one the contract emits.`);
  const role: PauserRole = command.role === '0' ? 'merchant' : 'operator';
  const base = { role, account: command.account, txHash: command.txHash };
  return command.paused
    ? [{ type: 'SubscriptionManagerPaused.v1', data: { ...base, pausedAt: command.at } }]
    : [{ type: 'SubscriptionManagerUnpaused.v1', data: { ...base, unpausedAt: command.at } }];
}

export const subscriptionManagerDecider = {
  initialState: initialSubscriptionManagerState,
  evolve: evolveSubscriptionManager,
  decide: decideSubscriptionManager,
};
