import type { BusMessage } from './event-bus.port';

/**
 * The isolation key (ConsumeOptions.isolationKey) of every consumer of `indexer.chain-observation.v1`: the chain's
 * stream and the watched address an observation is about (an Erc20TransferObserved's `to`, a deposit address; the
 * emitting `contract` of a manager's or a deposit's event; an ObservationRetracted's `address`, its observation's).
 * One stream carries a chain's observations for every merchant: keyed per address, an observation a consumer
 * cannot handle holds back only its own payment or subscription manager, in order, and never the chain.
 *
 * Read from the published contract (docs/asyncapi.yaml), so services outside the indexer's scope use it without
 * importing it; the indexer derives the same address with watchedAddressOf. A retraction published before it
 * named its address, or a type not listed here, is unattributed (undefined): it waits while any address of its
 * chain is parked.
 */
export function chainObservationIsolationKey(message: BusMessage): string | undefined {
  const data = message.data as { to?: unknown; contract?: unknown; address?: unknown } | null;
  const address = ((): unknown => {
    switch (message.type) {
      case 'Erc20TransferObserved.v1':
        return data?.to;
      case 'SubscriptionManagerEventObserved.v1':
      case 'PaymentDepositEventObserved.v1':
        return data?.contract;
      case 'ObservationRetracted.v1':
        return data?.address;
      default:
        return undefined;
    }
  })();
  // Lower case: the key of one address must not depend on how an event spelled it.
  return typeof address === 'string' && address !== ''
    ? `${message.key}:${address.toLowerCase()}`
    : undefined;
}
