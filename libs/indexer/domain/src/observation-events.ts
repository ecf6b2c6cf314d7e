/**
 * Chain observation events: what the indexer saw on a chain, published on `indexer.chain-observation.v1`.
 *
 * Stream layout: one ordered stream per chain, `chain-<CAIP-2 id>` (e.g. `chain-eip155:8453`), written by that
 * chain's follower alone. Observations are appended in block order; a reorg appends an ObservationRetracted for
 * every observation published from an orphaned block, then the observations of the new canonical blocks. A
 * consumer keys an observation by (chain, txHash, logIndex) and its block hash: the same log re-included in
 * another block after a reorg is a new observation (with its own event id) that follows the retraction.
 *
 * Wire conventions (docs/asyncapi.yaml, Encoding): token amounts, uint256 arguments and block numbers are decimal
 * strings; log indexes are JSON numbers; addresses are EIP-55 checksummed; hashes are lower-case hex.
 */
export const CHAIN_STREAM_CATEGORY = 'chain';

export const ERC20_TRANSFER_OBSERVED = 'Erc20TransferObserved.v1';
export const SUBSCRIPTION_MANAGER_EVENT_OBSERVED = 'SubscriptionManagerEventObserved.v1';
export const PAYMENT_DEPOSIT_EVENT_OBSERVED = 'PaymentDepositEventObserved.v1';
export const OBSERVATION_RETRACTED = 'ObservationRetracted.v1';

export type ObservedEventType =
  | typeof ERC20_TRANSFER_OBSERVED
  | typeof SUBSCRIPTION_MANAGER_EVENT_OBSERVED
  | typeof PAYMENT_DEPOSIT_EVENT_OBSERVED;
export type ChainObservationEventType = ObservedEventType | typeof OBSERVATION_RETRACTED;

/** Where a log sits: the fields every observation carries. */
export interface LogPosition {
  /** CAIP-2 chain id, e.g. `eip155:8453`. */
  readonly chain: string;
  /** Decimal string. */
  readonly blockNumber: string;
  readonly blockHash: string;
  /** ISO-8601 time of the block (the chain's timestamp, second precision). */
  readonly blockTime: string;
  readonly txHash: string;
  /** Index of the log within its block. */
  readonly logIndex: number;
  /** The contract that emitted the log. */
  readonly contract: string;
}

/** An ERC-20 `Transfer(from, to, value)` whose recipient is a watched deposit address. */
export interface Erc20TransferObservedData extends LogPosition {
  /** CAIP-19 id of the token (any ERC-20 contract: whether it is an accepted stablecoin is the consumer's call). */
  readonly asset: string;
  readonly from: string;
  readonly to: string;
  /** Base units, decimal string. */
  readonly amount: string;
}

/** Any event emitted by a watched subscription manager, decoded with its ABI. */
export interface SubscriptionManagerEventObservedData extends LogPosition {
  /** Solidity event name, e.g. `SubscriptionCharged`. */
  readonly event: string;
  /**
   * Decoded arguments by name, all as strings: uints and ints in decimal, addresses checksummed, bytes and
   * bytes32 as lower-case hex, bools as `true`/`false`.
   */
  readonly args: Readonly<Record<string, string>>;
}

/**
 * Any event emitted by a watched payment deposit contract (PaymentCaptured, PaymentRefunded, PaymentReclaimed,
 * PaymentRecovered, PaymentRescued, EscrowFunded, ...), decoded with its ABI: the same shape as a subscription
 * manager's (arguments as strings, by name).
 */
export type PaymentDepositEventObservedData = SubscriptionManagerEventObservedData;

/** An observation that came from a block that is no longer canonical. Consumers undo what it caused. */
export interface ObservationRetractedData {
  readonly chain: string;
  /** Event id of the retracted observation. */
  readonly observationId: string;
  readonly observationType: ObservedEventType;
  readonly txHash: string;
  readonly logIndex: number;
  /** Decimal string. */
  readonly blockNumber: string;
  /** The orphaned block the observation was published from. */
  readonly blockHash: string;
  readonly reason: 'reorg';
  /** The newest block both forks share: every observation above it was retracted. */
  /** Decimal string. */
  readonly forkBlockNumber: string;
  readonly forkBlockHash: string | null;
  /**
   * The watched address the retracted observation was about (`watchedAddressOf`): consumers isolate a chain's
   * observations per address, and the retraction must wait behind its observation when that address is held back.
   * Absent from retractions published before it existed: those cannot be attributed, and the retracted
   * observation is not in the event, so no upcaster can add it; consumers treat them as unattributed (they wait
   * while anything of their chain is held back).
   */
  readonly address?: string;
}

export type ChainObservationEvent =
  | { readonly type: typeof ERC20_TRANSFER_OBSERVED; readonly data: Erc20TransferObservedData }
  | {
      readonly type: typeof SUBSCRIPTION_MANAGER_EVENT_OBSERVED;
      readonly data: SubscriptionManagerEventObservedData;
    }
  | {
      readonly type: typeof PAYMENT_DEPOSIT_EVENT_OBSERVED;
      readonly data: PaymentDepositEventObservedData;
    }
  | { readonly type: typeof OBSERVATION_RETRACTED; readonly data: ObservationRetractedData };

/**
 * The watched address an observation is about: the recipient of an ERC-20 transfer (a deposit address), the
 * emitter of a contract's event (a subscription manager, a deposit contract). Everything that happens to one
 * payment or one manager shares it; consumers keep order per address (docs/architecture.md, Supervision).
 */
export function watchedAddressOf(
  type: ChainObservationEventType,
  data: { readonly to?: string; readonly contract?: string; readonly address?: string },
): string | undefined {
  switch (type) {
    case ERC20_TRANSFER_OBSERVED:
      return data.to;
    case SUBSCRIPTION_MANAGER_EVENT_OBSERVED:
    case PAYMENT_DEPOSIT_EVENT_OBSERVED:
      return data.contract;
    case OBSERVATION_RETRACTED:
      return data.address;
  }
}

/** The ordered observation stream of one chain. */
export function chainStreamId(caip2: string): string {
  return `${CHAIN_STREAM_CATEGORY}-${caip2}`;
}

/**
 * The idempotency key of an observation: the same log in the same block always maps to the same key, hence to
 * the same event id, so a redelivered append is a no-op. `occurrence` counts earlier retracted observations of
 * the same log in the same block (a chain that reorgs away and back again): it keeps the re-observation's id
 * distinct from the retracted one. It is 0 in every ordinary case, and then left out.
 */
export function observationKey(
  chain: string,
  txHash: string,
  logIndex: number,
  blockHash: string,
  occurrence = 0,
): string {
  const base = `obs:${chain}:${txHash.toLowerCase()}:${logIndex}:${blockHash.toLowerCase()}`;
  return occurrence === 0 ? base : `${base}#${occurrence}`;
}

/** The idempotency key of the retraction of one observation (by its event id). */
export function retractionKey(observationEventId: string): string {
  return `retract:${observationEventId}`;
}
