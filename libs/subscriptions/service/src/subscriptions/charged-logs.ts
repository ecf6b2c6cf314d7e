import { Interface, type Provider } from 'ethers';
import { SubscriptionManagerAbi } from '@stablepay/contracts';
import { findLogsSince } from '@stablepay/evm';
import type { ChargeObservation } from '@stablepay/subscriptions-domain';
import { chargeObservation, type ManagerLog } from './chain-facts';
import { decodeManagerLog } from './subscribe-flow';

const MANAGER = new Interface(SubscriptionManagerAbi);
const CHARGED_TOPIC = MANAGER.getEvent('SubscriptionCharged')?.topicHash ?? '';

type RawLog = Parameters<typeof decodeManagerLog>[0];

/**
 * The SubscriptionCharged log of `nonce` in a mined receipt, as the manager log the API path remembers for its
 * receipt check (SubscriptionReceiptChecks), with its index in the block; null when the receipt holds none.
 */
export function chargedReceiptLog(
  receipt: { readonly logs: readonly RawLog[]; readonly blockNumber: number; readonly blockHash: string },
  manager: string,
  subscriptionId: string,
  nonce: number,
  chain: string,
): { readonly log: ManagerLog & { readonly blockHash: string }; readonly index: number } | null {
  for (const log of receipt.logs) {
    if (log.address.toLowerCase() !== manager.toLowerCase()) continue;
    const decoded = decodeManagerLog(log);
    if (
      decoded?.event !== 'SubscriptionCharged' ||
      decoded.args['subscriptionId'] !== subscriptionId ||
      decoded.args['nonce'] !== String(nonce)
    )
      continue;
    return {
      index: (log as { index?: number }).index ?? 0,
      log: {
        chain,
        contract: manager,
        event: decoded.event,
        args: decoded.args,
        txHash: (log as { transactionHash?: string }).transactionHash ?? '',
        blockNumber: String(receipt.blockNumber),
        blockHash: receipt.blockHash,
        blockTime: new Date(Number(decoded.args['timestamp'] ?? 0) * 1000).toISOString(),
      },
    };
  }
  return null;
}

/**
 * The SubscriptionCharged logs of one subscription among `logs` (a query's), as charge observations. Each keeps where
 * the node placed its log (`receipt`: its block's hash and index) when the node gave them: a charge the service
 * records from it (one landed by someone else) is watched by the receipt check as its own receipt's charge is.
 */
export function chargedLogsIn(
  logs: readonly RawLog[],
  manager: string,
  subscriptionId: string,
  chain: string,
): ChargeObservation[] {
  const found: ChargeObservation[] = [];
  for (const log of logs) {
    if (log.address.toLowerCase() !== manager.toLowerCase()) continue;
    const decoded = decodeManagerLog(log);
    if (decoded?.event !== 'SubscriptionCharged' || decoded.args['subscriptionId'] !== subscriptionId)
      continue;
    const placed = log as {
      transactionHash?: string;
      blockNumber?: number;
      blockHash?: string;
      index?: number;
    };
    const charge = chargeObservation({
      chain,
      contract: manager,
      event: decoded.event,
      args: decoded.args,
      txHash: placed.transactionHash ?? '',
      blockNumber: String(placed.blockNumber ?? 0),
      // The log carries the block time (`timestamp`): no further RPC round trip.
      blockTime: new Date(Number(decoded.args['timestamp'] ?? 0) * 1000).toISOString(),
    });
    found.push(
      placed.blockHash && placed.index !== undefined
        ? {
            ...charge,
            receipt: { manager, blockHash: placed.blockHash.toLowerCase(), logIndex: placed.index },
          }
        : charge,
    );
  }
  return found;
}

/** What the lookup reads of a provider (an ethers Provider). */
export type ChargedLogsProvider = Pick<Provider, 'getLogs' | 'getBlockNumber' | 'getTransactionReceipt'>;

/**
 * Every SubscriptionCharged log of a subscription on chain, whoever submitted it (topic: the subscription id). Read
 * from the subscribe transaction's block (no charge of a subscription precedes its creation) to the head in windows
 * of `maxRange` blocks (CHAIN_LOG_RANGE): RPC providers refuse a query from block 0 on a real chain. When the
 * subscribe receipt is not found (a node that pruned it), the lookup reads the last UNKNOWN_START_LOOKBACK_BLOCKS.
 */
export async function findChargedLogs(
  provider: ChargedLogsProvider,
  manager: string,
  subscription: { readonly subscriptionId: string; readonly txHash: string },
  chain: string,
  maxRange: number,
): Promise<ChargeObservation[]> {
  const subscribed = await provider.getTransactionReceipt(subscription.txHash);
  const logs = await findLogsSince(
    provider,
    {
      address: manager,
      topics: [CHARGED_TOPIC, subscription.subscriptionId],
      fromBlock: subscribed?.blockNumber ?? null,
    },
    { maxRange },
  );
  return chargedLogsIn(logs as unknown as RawLog[], manager, subscription.subscriptionId, chain);
}
