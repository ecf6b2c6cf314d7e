import { Interface, getAddress, isError, zeroPadValue, type Log } from 'ethers';
import { DEFAULT_CHAIN_LOG_RANGE, findLogsSince } from '@stablepay/evm';
import {
  connectPayoutDeposit,
  PayoutDepositAbi,
  PayoutDepositFactoryAbi,
  STABLEPAY_ERRORS_INTERFACE,
  payoutDepositAddress,
  toOnChainId,
} from '@stablepay/contracts';
import type { Broadcast, RelayerSet, RelayOutcome, RelayRequest } from '@stablepay/relayer';
import type { PayoutChainConfig } from './chain-operator.config';
import type { WatchAddressCommand, WatchAnswer } from './indexer-watch.commands';

const FACTORY = new Interface(PayoutDepositFactoryAbi);
const DEPOSIT = new Interface(PayoutDepositAbi);
/**
 * The factory's functions with every Stablepay error: `sweep` and `refund` bubble the deposit's own reverts
 * (AlreadySwept, AmountExceedsAvailable, InvalidSignature, a token's TokenTransferFailed), which the factory's ABI
 * alone would leave unnamed.
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

/** One ERC-20 at a customer's deposit address on one chain. */
export interface PayoutTokenRef extends PayoutCustomerRef {
  /** CAIP-2 id of a chain the relayers serve. */
  readonly chain: string;
  readonly token: string;
}

export interface PayoutSweepRequest extends PayoutTokenRef {
  /**
   * Exactly what leaves the address (the payout's deposit, base units): the address is shared by the customer's
   * payouts and may hold funds that are not this payout's (held ones among them), so never its whole balance.
   */
  readonly amount: bigint;
  /** The payout this sweep forwards (bytes32 on chain via `toOnChainId`): the deposit sweeps it once. */
  readonly payoutId: string;
  /** The relayer's hook with the signed sweep's hash before it is broadcast (RelayRequest.beforeBroadcast). */
  readonly beforeBroadcast?: RelayRequest['beforeBroadcast'];
}

/**
 * The merchant's `PayoutRefund` signature (EIP-712, verifyingContract = the deposit address, on `chain`) returning
 * one held payout's deposit.
 */
export interface PayoutRefundRequest extends PayoutTokenRef {
  readonly to: string;
  /** Exactly what leaves the address (the payout's deposit): never the balance, as for a sweep. */
  readonly amount: bigint;
  /** The payout refunded (bytes32 on chain via `toOnChainId`): the deposit refunds it once, and never sweeps it. */
  readonly payoutId: string;
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
 * - `already_swept`: this payout's sweep is on chain already (`AlreadySwept` in simulation, nothing sent, or a
 *   concurrent attempt mined first and this one reverted): `sweeps({ ..., payoutId })` finds it.
 * - `insufficient_balance`: the address holds less of the token than `amount` (simulation; nothing sent).
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
  | (Mined & { readonly kind: 'swept'; readonly offRamp: string; readonly payoutId: string })
  | {
      readonly kind: 'already_swept';
      readonly chain: string;
      readonly deposit: string;
      readonly token: string;
      readonly payoutId: string;
    }
  | {
      readonly kind: 'insufficient_balance';
      readonly chain: string;
      readonly deposit: string;
      readonly token: string;
      readonly amount: bigint;
      /** What the address held in the simulation. */
      readonly available: bigint;
    }
  | PayoutChainFailure;

/**
 * As the sweep's: `already_refunded` (`AlreadyRefunded`: this payout's refund is on chain, `refunds({ payoutId })`
 * finds it), `already_swept` (the payout went to the off-ramp: nothing to return from the address),
 * `insufficient_balance`, or a failure.
 */
export type PayoutRefundOutcome =
  | (Mined & { readonly kind: 'refunded'; readonly to: string; readonly payoutId: string })
  | {
      readonly kind: 'already_refunded';
      readonly chain: string;
      readonly deposit: string;
      readonly token: string;
      readonly payoutId: string;
    }
  | Extract<PayoutSweepOutcome, { kind: 'already_swept' | 'insufficient_balance' }>
  | PayoutChainFailure;

/** A sweep (`PayoutSwept`) or refund (`PayoutRefunded`) of the deposit found on chain. */
export interface PayoutSweepRecord {
  /** The payout's bytes32 (`toOnChainId(payoutId)`). */
  readonly payoutId: string;
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
 * - `sweep(request)`: forwards exactly one payout's amount of a token to the off-ramp through the relayer (simulated
 *   first, managed nonces, receipt), once per payout, deploying the deposit contract in the same transaction when
 *   needed (payout.forwarded);
 * - `refund(request)`: a merchant-signed return of one held payout's deposit to its sender (payout.refunded), once
 *   per payout, deploying the deposit in the same transaction when needed; `refunds(request)` finds it again;
 * - `sweeps(request)`: the sweeps of a token already on chain (of one payout, with `payoutId`), for a retry after a
 *   lost answer (a payout's sweep that landed leaves `already_swept` behind, so the retry looks up what its first
 *   attempt did), read in windows of the chain's `CHAIN_LOG_RANGE`.
 * Screening is the caller's: sweep only deposits that passed it (the contract lets only the operator sweep, so a
 * deposit never swept stays put).
 */
export class PayoutDeposits {
  constructor(
    private readonly relayers: RelayerSet,
    private readonly config: PayoutChainConfig,
    /** Most blocks per eth_getLogs window on a chain (CHAIN_LOG_RANGE, `OperatorChain.logRange`). */
    private readonly logRange: (chain: string) => number = () => DEFAULT_CHAIN_LOG_RANGE,
    /** Blocks below the head a lookup with no start reads (default UNKNOWN_START_LOOKBACK_BLOCKS). */
    private readonly lookback?: number,
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
    const payoutId = toOnChainId(request.payoutId);
    const outcome = await this.relayers.for(request.chain).submit({
      to: this.config.factory,
      abi: FACTORY_CALLS,
      data: FACTORY.encodeFunctionData('sweep', [
        toOnChainId(request.merchantId),
        toOnChainId(request.customerId),
        this.config.offRamp,
        token,
        request.amount,
        payoutId,
      ]),
      ...(request.beforeBroadcast ? { beforeBroadcast: request.beforeBroadcast } : {}),
    });
    const settled = settledAlready(request, deposit, token, payoutId, outcome);
    // A refunded payout is never swept: that refusal is a failure of the sweep like any other.
    if (settled && settled.kind !== 'already_refunded') return settled;
    if (outcome.kind !== 'confirmed') return failure(request.chain, outcome);
    const swept = this.moved(outcome.receipt.logs, deposit, 'PayoutSwept');
    return {
      kind: 'swept',
      ...this.mined(request.chain, deposit, token, outcome, swept),
      offRamp: this.config.offRamp,
      payoutId,
    };
  }

  /**
   * Whether the payout's sweep is on chain: the deposit's `swept(payoutId)` (no deposit deployed yet: not swept). One
   * call, so a flow step can tell that the funds already left before it judges them again. `deposit`: the payout's
   * own address when it may not be the configured factory's and off-ramp's any more (a rotation since); a contract
   * there without `swept` (the earliest factory's clones) answers not swept.
   */
  async isSwept(
    request: PayoutCustomerRef & {
      readonly chain: string;
      readonly payoutId: string;
      readonly deposit?: string;
    },
  ): Promise<boolean> {
    const deposit = request.deposit ?? this.address(request);
    const provider = this.relayers.for(request.chain).provider;
    if ((await provider.getCode(deposit)) === '0x') return false;
    try {
      return await connectPayoutDeposit(deposit, provider).swept(toOnChainId(request.payoutId));
    } catch (error) {
      if (isError(error, 'CALL_EXCEPTION')) return false;
      throw error;
    }
  }

  /**
   * Every `PayoutSwept` of `token` from the customer's deposit on `chain` (only the sweep of `payoutId` when given)
   * from `fromBlock` to the head, oldest first. Read in windows of the chain's log range: hosted RPC endpoints refuse
   * a wide block range. `fromBlock` null: the last `UNKNOWN_START_LOOKBACK_BLOCKS` blocks, never the chain from 0.
   */
  sweeps(
    request: PayoutTokenRef & {
      readonly payoutId?: string;
      readonly fromBlock: number | null;
      /** The deposit contract to read, when not the configured factory's and off-ramp's (as for `isSwept`). */
      readonly deposit?: string;
    },
  ): Promise<PayoutSweepRecord[]> {
    return this.logsOf('PayoutSwept', request);
  }

  /** Every `PayoutRefunded` of `token` (of one payout with `payoutId`), as `sweeps` reads them. */
  refunds(
    request: PayoutTokenRef & { readonly payoutId?: string; readonly fromBlock: number | null },
  ): Promise<PayoutSweepRecord[]> {
    return this.logsOf('PayoutRefunded', request);
  }

  private async logsOf(
    event: 'PayoutSwept' | 'PayoutRefunded',
    request: PayoutTokenRef & {
      readonly payoutId?: string;
      readonly fromBlock: number | null;
      readonly deposit?: string;
    },
  ): Promise<PayoutSweepRecord[]> {
    const deposit = request.deposit ?? this.address(request);
    const logs = await findLogsSince(
      this.relayers.for(request.chain).provider,
      {
        address: deposit,
        topics: [
          DEPOSIT.getEvent(event)?.topicHash ?? null,
          toOnChainId(request.customerId),
          zeroPadValue(getAddress(request.token), 32),
          request.payoutId === undefined ? null : toOnChainId(request.payoutId),
        ],
        fromBlock: request.fromBlock,
      },
      {
        maxRange: this.logRange(request.chain),
        ...(this.lookback === undefined ? {} : { lookback: this.lookback }),
      },
    );
    return logs.flatMap((log) => {
      const parsed = DEPOSIT.parseLog(log);
      if (parsed?.name !== event) return [];
      return [
        {
          payoutId: String(parsed.args['payoutId']),
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
   * `PayoutDepositFactory.refund`: one transaction that deploys the deposit when needed and returns exactly one held
   * payout's deposit, once, so a refund the deposit would refuse (bad signature, too much, a payout already swept or
   * refunded) is refused in simulation before anything is deployed.
   */
  async refund(request: PayoutRefundRequest): Promise<PayoutRefundOutcome> {
    const deposit = this.address(request);
    const token = getAddress(request.token);
    const to = getAddress(request.to);
    const payoutId = toOnChainId(request.payoutId);
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
        payoutId,
        request.deadline,
        request.signature,
      ]),
    });
    const settled = settledAlready(request, deposit, token, payoutId, outcome);
    if (settled) return settled;
    if (outcome.kind !== 'confirmed') return failure(request.chain, outcome);
    const refunded = this.moved(outcome.receipt.logs, deposit, 'PayoutRefunded');
    return {
      kind: 'refunded',
      ...this.mined(request.chain, deposit, token, outcome, refunded),
      to,
      payoutId,
    };
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

/**
 * The deposit's answers that are outcomes rather than failures, for a sweep and a refund alike: the payout already
 * left the address (`AlreadySwept`, `AlreadyRefunded`: in simulation nothing was sent; reverted: a concurrent attempt
 * mined first), or less than `amount` is there (simulation only).
 */
function settledAlready(
  request: PayoutTokenRef & { readonly amount: bigint },
  deposit: string,
  token: string,
  payoutId: string,
  outcome: RelayOutcome,
): Extract<
  PayoutRefundOutcome,
  { kind: 'already_refunded' | 'already_swept' | 'insufficient_balance' }
> | null {
  const refused =
    outcome.kind === 'simulation_rejected'
      ? outcome.errorName
      : outcome.kind === 'reverted'
        ? outcome.revert?.errorName
        : undefined;
  const chain = request.chain;
  if (refused === 'AlreadySwept') return { kind: 'already_swept', chain, deposit, token, payoutId };
  if (refused === 'AlreadyRefunded') return { kind: 'already_refunded', chain, deposit, token, payoutId };
  if (outcome.kind === 'simulation_rejected' && refused === 'AmountExceedsAvailable') {
    const available = outcome.args[1];
    return {
      kind: 'insufficient_balance',
      chain,
      deposit,
      token,
      amount: request.amount,
      available: typeof available === 'bigint' ? available : 0n,
    };
  }
  return null;
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
