import { getAddress, id, Interface, type ParamType, type Result, zeroPadValue } from 'ethers';
import { PaymentDepositAbi, SubscriptionManagerAbi } from '@stablepay/contracts';
import { formatCaip19 } from '@stablepay/evm';
import {
  ERC20_TRANSFER_OBSERVED,
  PAYMENT_DEPOSIT_EVENT_OBSERVED,
  SUBSCRIPTION_MANAGER_EVENT_OBSERVED,
  type Erc20TransferObservedData,
  type ObservedEventType,
  type SubscriptionManagerEventObservedData,
} from '@stablepay/indexer-domain';
import type { ChainLog } from './chain-rpc';

export const ERC20_TRANSFER_TOPIC = id('Transfer(address,address,uint256)');

/** The kinds of contract whose every event the indexer publishes. */
export type WatchedContractKind = 'subscription_manager' | 'payment_deposit';
export const WATCHED_CONTRACT_KINDS: readonly WatchedContractKind[] = [
  'subscription_manager',
  'payment_deposit',
];

const ABI_OF: Readonly<
  Record<
    WatchedContractKind,
    {
      readonly abi: Interface;
      readonly type: typeof SUBSCRIPTION_MANAGER_EVENT_OBSERVED | typeof PAYMENT_DEPOSIT_EVENT_OBSERVED;
    }
  >
> = {
  subscription_manager: {
    abi: new Interface(SubscriptionManagerAbi),
    type: SUBSCRIPTION_MANAGER_EVENT_OBSERVED,
  },
  payment_deposit: { abi: new Interface(PaymentDepositAbi), type: PAYMENT_DEPOSIT_EVENT_OBSERVED },
};

/** An observation decided from a log, before its block time and event id are known. */
export type DecodedObservation =
  | {
      readonly type: typeof ERC20_TRANSFER_OBSERVED;
      readonly data: Omit<Erc20TransferObservedData, 'blockTime'>;
    }
  | {
      readonly type: typeof SUBSCRIPTION_MANAGER_EVENT_OBSERVED | typeof PAYMENT_DEPOSIT_EVENT_OBSERVED;
      readonly data: Omit<SubscriptionManagerEventObservedData, 'blockTime'>;
    };

export type ObservationData = Erc20TransferObservedData | SubscriptionManagerEventObservedData;

/** The topic form of an address (32 bytes, left-padded), as eth_getLogs filters on indexed address arguments. */
export function addressTopic(address: string): string {
  return zeroPadValue(address.toLowerCase(), 32);
}

function position(chain: string, log: ChainLog) {
  return {
    chain,
    blockNumber: String(log.blockNumber),
    blockHash: log.blockHash,
    txHash: log.txHash,
    logIndex: log.logIndex,
    contract: checksummed(log.address),
  };
}

/**
 * An ERC-20 Transfer, or null for anything else with the same topic: ERC-721 shares the signature but indexes the
 * token id (four topics), and a malformed token may emit a non-32-byte value or dirty address topics. Decoded by
 * hand (no ABI coder): this runs once per log, and the follower ingests thousands of logs per range.
 */
export function decodeErc20Transfer(
  chain: string,
  chainId: bigint,
  log: ChainLog,
): DecodedObservation | null {
  if (log.topics.length !== 3 || log.topics[0] !== ERC20_TRANSFER_TOPIC) return null;
  const [, fromTopic, toTopic] = log.topics;
  if (fromTopic === undefined || toTopic === undefined || !UINT256.test(log.data)) return null;
  const from = topicAddress(fromTopic);
  const to = topicAddress(toTopic);
  if (from === null || to === null) return null;
  const token = checksummed(log.address);
  return {
    type: ERC20_TRANSFER_OBSERVED,
    data: {
      ...position(chain, log),
      asset: assetId(chainId, token),
      from,
      to,
      amount: BigInt(log.data).toString(),
    },
  };
}

const UINT256 = /^0x[0-9a-fA-F]{64}$/;
const ADDRESS_TOPIC = /^0x0{24}([0-9a-fA-F]{40})$/;

/** An indexed address argument (32 bytes, the upper 12 zero), checksummed; null when the upper bytes are dirty. */
function topicAddress(topic: string): string | null {
  const match = ADDRESS_TOPIC.exec(topic);
  return match?.[1] === undefined ? null : checksummed(`0x${match[1]}`);
}

const assetCache = new Map<string, string>();
function assetId(chainId: bigint, token: string): string {
  const key = `${chainId}:${token}`;
  let value = assetCache.get(key);
  if (value === undefined) {
    value = formatCaip19(chainId, token);
    if (assetCache.size >= 10_000) assetCache.clear();
    assetCache.set(key, value);
  }
  return value;
}

// EIP-55 checksumming hashes the address; deposit addresses and tokens repeat across logs, so keep the answers.
const checksumCache = new Map<string, string>();
function checksummed(address: string): string {
  const key = address.toLowerCase();
  let value = checksumCache.get(key);
  if (value === undefined) {
    value = getAddress(key);
    if (checksumCache.size >= 10_000) checksumCache.clear();
    checksumCache.set(key, value);
  }
  return value;
}

/** A watched contract's event decoded with its ABI; null for a log its ABI does not know (logged by the caller). */
export function decodeContractEvent(
  kind: WatchedContractKind,
  chain: string,
  log: ChainLog,
): DecodedObservation | null {
  const { abi, type } = ABI_OF[kind];
  let parsed: ReturnType<Interface['parseLog']>;
  try {
    parsed = abi.parseLog({ topics: [...log.topics], data: log.data });
  } catch {
    return null;
  }
  if (parsed === null) return null;
  return {
    type,
    data: {
      ...position(chain, log),
      event: parsed.name,
      args: stringifyArgs(parsed.fragment.inputs, parsed.args),
    },
  };
}

/** The decoded arguments as strings, by name (see SubscriptionManagerEventObservedData.args). */
function stringifyArgs(inputs: readonly ParamType[], values: Result): Record<string, string> {
  const out: Record<string, string> = {};
  inputs.forEach((input, i) => {
    out[input.name || `arg${i}`] = stringifyValue(input, values[i]);
  });
  return out;
}

function stringifyValue(type: ParamType, value: unknown): string {
  if (type.baseType === 'array' || type.baseType === 'tuple') {
    // Nested values travel as JSON text of the same string forms (no SubscriptionManager event has one today).
    return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  }
  if (typeof value === 'bigint') return value.toString();
  if (type.baseType === 'address' && typeof value === 'string') return getAddress(value);
  if (typeof value === 'string') return type.baseType.startsWith('bytes') ? value.toLowerCase() : value;
  return String(value);
}

export function isObservedType(type: string): type is ObservedEventType {
  return (
    type === ERC20_TRANSFER_OBSERVED ||
    type === SUBSCRIPTION_MANAGER_EVENT_OBSERVED ||
    type === PAYMENT_DEPOSIT_EVENT_OBSERVED
  );
}
