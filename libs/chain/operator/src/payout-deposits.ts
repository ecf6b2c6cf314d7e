import { Interface, getAddress, zeroPadValue, type Log } from 'ethers';
import {
  PayoutDepositAbi,
  PayoutDepositFactoryAbi,
  STABLEPAY_ERRORS_INTERFACE,
  payoutDepositAddress,
  toOnChainId,
} from '@stablepay/contracts';
import type { Broadcast, RelayerSet, RelayOutcome } from '@stablepay/relayer';
import type { PayoutChainConfig } from './chain-operator.config';
import type { WatchAddressCommand, WatchAnswer } from './indexer-watch.commands';

const FACTORY = new Interface(PayoutDepositFactoryAbi);
const DEPOSIT = new Interface(PayoutDepositAbi);
/**
 * The factory's functions with every Stablepay error: `sweep` and `refund` bubble the deposit's own reverts
 * (NothingToSweep, InvalidSignature, a token's TokenTransferFailed), which the factory's ABI alone would leave unnamed.
 */
const FACTORY_CALLS = new Interface([
  ...FACTORY.fragments.filter((f) => f.type === 'function'),
  ...STABLEPAY_ERRORS_INTERFACE.fragments,
]);

/** A payout customer, by the service's own ids (mapped to bytes32 with `toOnChainId`). */
export interface PayoutCustomerRef {
  readonly merchantId: string;
  readonly customerId: string;
}

export interface PayoutSweepRequest extends PayoutCustomerRef {
  /** CAIP-2 id of a chain the relayers serve. */
  readonly chain: string;
  /** The ERC-20 to forward (its whole balance at the deposit address). */
  readonly token: string;
}

/** The merchant's `PayoutRefund` signature (EIP-712, verifyingContract = the deposit address, on `chain`). */
export interface PayoutRefundRequest extends PayoutSweepRequest {
  readonly to: string;
  readonly amount: bigint;
  readonly deadline: bigint;
  readonly signature: string;
}

interface Mined {
  readonly chain: string;
  readonly deposit: string;
  readonly token: string;
  readonly amount: bigint;
  /** What the destination received (less than `amount` for a fee-on-transfer token). */
  readonly received: bigint;
  /** True when this transaction also deployed the deposit contract. */
  readonly deployed: boolean;
  readonly txHash: string;
  readonly blockNumber: number;
  /** Native-currency wei the operator paid for gas. */
  readonly fee: bigint;
}

/**
 * Results, never exceptions, for what the chain answered; an exception means infrastructure trouble (RPC down,
 * relayer out of gas money), as with the relayer itself.
 * - `nothing_to_sweep`: the address holds none of the token (simulation; nothing sent).
 * - `rejected`: the simulation refused for another reason (e.g. NotOperator: the relayer key is not the
 *   registry's operator); nothing sent, no nonce used.
 * - `reverted`: mined with status 0 (`errorName` decoded by replay, null when it could not be).
 * - `receipt_timeout`: broadcast but not mined in time; it may still land: `relayers.for(chain).waitForReceipt(broadcast)`.
 */
export type PayoutChainFailure =
  | { readonly kind: 'rejected'; readonly chain: string; readonly errorName: string }
  | {
      readonly kind: 'reverted';
      readonly chain: string;
      readonly txHash: string;
      readonly errorName: string | null;
    }
  | {
      readonly kind: 'receipt_timeout';
      readonly chain: string;
      readonly txHash: string;
      readonly broadcast: Broadcast;
    };

export type PayoutSweepOutcome =
  | (Mined & { readonly kind: 'swept'; readonly offRamp: string })
  | {
      readonly kind: 'nothing_to_sweep';
      readonly chain: string;
      readonly deposit: string;
      readonly token: string;
    }
  | PayoutChainFailure;

export type PayoutRefundOutcome =
  (Mined & { readonly kind: 'refunded'; readonly to: string }) | PayoutChainFailure;

/** A sweep found on chain (`PayoutSwept` of the deposit). */
export interface PayoutSweepRecord {
  readonly txHash: string;
  readonly blockNumber: number;
  readonly logIndex: number;
  readonly amount: bigint;
  readonly received: bigint;
}

type Watches = { watchAddress(command: WatchAddressCommand): Promise<WatchAnswer> };

/**
 * The operator's side of payout deposit addresses (Payouts, beta; libs/chain/contracts PayoutDepositFactory):
 * - `address(customer)`: the customer's one EVM deposit address, valid on every chain (pure, no I/O);
 * - `watch(customer, watches)`: asks the indexer to watch it on every chain the relayers serve, so each ERC-20
 *   transfer to it becomes an `Erc20TransferObserved.v1` on `chain-<caip2>` (payout.deposit_detected);
 * - `sweep(request)`: forwards the whole balance of a token to the off-ramp through the relayer (simulated first,
 *   managed nonces, receipt), deploying the deposit contract in the same transaction when needed (payout.forwarded);
 * - `refund(request)`: a merchant-signed return to the customer's sender (payout.refunded), deploying the deposit in
 *   the same transaction when needed;
 * - `sweeps(request)`: the sweeps of a token already on chain, for a retry after a lost answer (a sweep that
 *   landed leaves `nothing_to_sweep` behind, so the retry looks up what the first attempt did).
 * Screening is the caller's: sweep only deposits that passed it (the contract lets only the operator sweep, so a
 * deposit never swept stays put).
 */
export class PayoutDeposits {
  constructor(
    private readonly relayers: RelayerSet,
    private readonly config: PayoutChainConfig,
  ) {}

  /** The customer's deposit address: the same on every chain, known before anything is deployed. */
  address(customer: PayoutCustomerRef): string {
    return payoutDepositAddress({ factory: this.config.factory, offRamp: this.config.offRamp, ...customer });
  }

  /**
   * Registers the address with the indexer on every chain the relayers serve (idempotent; the indexer's watch
   * command). `fromBlock` per chain, default the follower's checkpoint when the watch arrives: register before the
   * address is shown to the customer, so no transfer precedes its watch.
   */
  async watch(
    customer: PayoutCustomerRef,
    watches: Watches,
    fromBlock: Readonly<Record<string, number>> = {},
  ): Promise<string> {
    const address = this.address(customer);
    for (const chain of this.relayers.chains()) {
      const from = fromBlock[chain];
      await watches.watchAddress({ chain, address, ...(from === undefined ? {} : { fromBlock: from }) });
    }
    return address;
  }

  async sweep(request: PayoutSweepRequest): Promise<PayoutSweepOutcome> {
    const deposit = this.address(request);
    const token = getAddress(request.token);
    const outcome = await this.relayers.for(request.chain).submit({
      to: this.config.factory,
      abi: FACTORY_CALLS,
      data: FACTORY.encodeFunctionData('sweep', [
        toOnChainId(request.merchantId),
        toOnChainId(request.customerId),
        this.config.offRamp,
        token,
      ]),
    });
    if (outcome.kind === 'simulation_rejected' && outcome.errorName === 'NothingToSweep')
      return { kind: 'nothing_to_sweep', chain: request.chain, deposit, token };
    if (outcome.kind !== 'confirmed') return failure(request.chain, outcome);
    const swept = this.moved(outcome.receipt.logs, deposit, 'PayoutSwept');
    return {
      kind: 'swept',
      ...this.mined(request.chain, deposit, token, outcome, swept),
      offRamp: this.config.offRamp,
    };
  }

  /**
   * Every `PayoutSwept` of `token` from the customer's deposit on `chain` since `fromBlock` (default 0: narrow it on
   * hosted RPC endpoints, which bound the block range of a log query), oldest first.
   */
  async sweeps(request: PayoutSweepRequest & { readonly fromBlock?: number }): Promise<PayoutSweepRecord[]> {
    const deposit = this.address(request);
    const logs = await this.relayers.for(request.chain).provider.getLogs({
      address: deposit,
      topics: [
        DEPOSIT.getEvent('PayoutSwept')?.topicHash ?? null,
        toOnChainId(request.customerId),
        zeroPadValue(getAddress(request.token), 32),
      ],
      fromBlock: request.fromBlock ?? 0,
      toBlock: 'latest',
    });
    return logs.flatMap((log) => {
      const parsed = DEPOSIT.parseLog(log);
      if (parsed?.name !== 'PayoutSwept') return [];
      return [
        {
          txHash: log.transactionHash,
          blockNumber: log.blockNumber,
          logIndex: log.index,
          amount: BigInt(parsed.args['amount'] as bigint),
          received: BigInt(parsed.args['received'] as bigint),
        },
      ];
    });
  }

  /**
   * `PayoutDepositFactory.refund`: one transaction that deploys the deposit when needed and refunds, so a refund the
   * deposit would refuse (bad signature, too much) is refused in simulation before anything is deployed.
   */
  async refund(request: PayoutRefundRequest): Promise<PayoutRefundOutcome> {
    const deposit = this.address(request);
    const token = getAddress(request.token);
    const to = getAddress(request.to);
    const outcome = await this.relayers.for(request.chain).submit({
      to: this.config.factory,
      abi: FACTORY_CALLS,
      data: FACTORY.encodeFunctionData('refund', [
        toOnChainId(request.merchantId),
        toOnChainId(request.customerId),
        this.config.offRamp,
        token,
        to,
        request.amount,
        request.deadline,
        request.signature,
      ]),
    });
    if (outcome.kind !== 'confirmed') return failure(request.chain, outcome);
    const refunded = this.moved(outcome.receipt.logs, deposit, 'PayoutRefunded');
    return { kind: 'refunded', ...this.mined(request.chain, deposit, token, outcome, refunded), to };
  }

  /** The amounts from the deposit's own event in the receipt (what happened, not what was asked). */
  private moved(
    logs: readonly Log[],
    deposit: string,
    event: 'PayoutSwept' | 'PayoutRefunded',
  ): { amount: bigint; received: bigint; deployed: boolean } {
    let moved: { amount: bigint; received: bigint } | null = null;
    let deployed = false;
    for (const log of logs) {
      const address = getAddress(log.address);
      if (address === getAddress(this.config.factory)) {
        deployed ||= FACTORY.parseLog(log)?.name === 'PayoutDepositDeployed';
      } else if (address === deposit) {
        const parsed = DEPOSIT.parseLog(log);
        if (parsed?.name === event) {
          moved = {
            amount: BigInt(parsed.args['amount'] as bigint),
            received: BigInt(parsed.args['received'] as bigint),
          };
        }
      }
    }
    // A confirmed sweep or refund always emits it; its absence means another contract answered at the address.
    if (moved === null) throw new Error(`no ${event} log from ${deposit} in a confirmed transaction`);
    return { ...moved, deployed };
  }

  private mined(
    chain: string,
    deposit: string,
    token: string,
    outcome: Extract<RelayOutcome, { kind: 'confirmed' }>,
    moved: { amount: bigint; received: bigint; deployed: boolean },
  ): Mined {
    return {
      chain,
      deposit,
      token,
      ...moved,
      txHash: outcome.txHash,
      blockNumber: outcome.blockNumber,
      fee: outcome.fee,
    };
  }
}

function failure(chain: string, outcome: Exclude<RelayOutcome, { kind: 'confirmed' }>): PayoutChainFailure {
  switch (outcome.kind) {
    case 'simulation_rejected':
      return { kind: 'rejected', chain, errorName: outcome.errorName };
    case 'reverted':
      return {
        kind: 'reverted',
        chain,
        txHash: outcome.txHash,
        errorName: outcome.revert?.errorName ?? null,
      };
    case 'receipt_timeout':
      return { kind: 'receipt_timeout', chain, txHash: outcome.txHash, broadcast: outcome.broadcast };
  }
}
