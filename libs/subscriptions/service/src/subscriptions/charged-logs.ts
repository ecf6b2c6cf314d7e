import { Interface, type Provider } from 'ethers';
import { SubscriptionManagerAbi } from '@stablepay/contracts';
import type { ChargeObservation } from '@stablepay/subscriptions-domain';
import { chargeObservation } from './chain-facts';
import { decodeManagerLog } from './subscribe-flow';

const MANAGER = new Interface(SubscriptionManagerAbi);
const CHARGED_TOPIC = MANAGER.getEvent('SubscriptionCharged')?.topicHash ?? '';

type RawLog = Parameters<typeof decodeManagerLog>[0];

/** The SubscriptionCharged logs of one subscription among `logs` (a receipt's, or a query's), as charge observations. */
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
    const txHash = (log as { transactionHash?: string }).transactionHash ?? '';
    const blockNumber = String((log as { blockNumber?: number }).blockNumber ?? 0);
    found.push(
      chargeObservation({
        chain,
        contract: manager,
        event: decoded.event,
        args: decoded.args,
        txHash,
        blockNumber,
        // The log carries the block time (`timestamp`): no further RPC round trip.
        blockTime: new Date(Number(decoded.args['timestamp'] ?? 0) * 1000).toISOString(),
      }),
    );
  }
  return found;
}

/** Every SubscriptionCharged log of a subscription on chain, whoever submitted it (topic: the subscription id). */
export async function findChargedLogs(
  provider: Pick<Provider, 'getLogs'>,
  manager: string,
  subscriptionId: string,
  chain: string,
): Promise<ChargeObservation[]> {
  const logs = await provider.getLogs({
    address: manager,
    topics: [CHARGED_TOPIC, subscriptionId],
    fromBlock: 0,
    toBlock: 'latest',
  });
  return chargedLogsIn(logs as unknown as RawLog[], manager, subscriptionId, chain);
}
