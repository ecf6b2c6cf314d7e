import { Logger } from '@nestjs/common';
import { getAddress } from 'ethers';
import { blockMinedBefore } from '@stablepay/evm';
import { type PayoutChainConfig, PayoutDeposits, type PayoutSweepRequest } from '@stablepay/chain-operator';
import type { PayoutState } from '@stablepay/payouts-domain';
import type { RelayerSet } from '@stablepay/relayer';
import type { Counter } from 'prom-client';
import { refundWithheld, sharedCounter, sweepUnresolved } from './retracted-after-sweep';

export const PAYOUT_SWEEPER = Symbol('PAYOUT_SWEEPER');

const SWEEPS_METRIC = 'stablepay_payout_sweeps_total';

function sweepsCounter(): Counter<'chain' | 'outcome'> {
  return sharedCounter(
    SWEEPS_METRIC,
    'Payout deposit sweeps to the off-ramp by outcome (swept, found: a retry found the earlier sweep; failed: retried by the flow)',
    ['chain', 'outcome'],
  );
}

/**
 * The payout flow's on-chain forward (docs/payouts.md, "Flow"): the operator sweeps the payout's deposit amount from
 * the customer's deposit address to the off-ramp bound into it (PayoutDeposits.sweep; the first sweep deploys the
 * clone) and answers the transaction. Only that amount moves: the address is shared by the customer's payouts, and
 * funds held there (a flagged sender's deposit, one no payout waits for, a suspended customer's) stay.
 *
 * Idempotent across a crash between the transaction and the fact: the payout id is bound into the sweep and the
 * deposit sweeps a payout once, so a retry is refused on chain (`already_swept`, nothing sent) and answers the
 * `PayoutSwept` of this payout, looked up by its id from the deposit's block: never another payout's sweep, even
 * one of the same customer and amount. Everything else (RPC down, a rejected simulation, less at the address than
 * the deposit, a revert, a receipt not in time) throws: the flow's message is retried with the bus's backoff, counted
 * in `stablepay_payout_sweeps_total{outcome="failed"}` and logged; the payout stays `deposit_detected`, never lost.
 */
export class PayoutSweeper {
  private readonly logger = new Logger('payouts.sweep');
  private readonly deposits: PayoutDeposits;
  private readonly counter = sweepsCounter();

  constructor(
    private readonly relayers: RelayerSet,
    config: PayoutChainConfig,
    /** Most blocks per eth_getLogs window on a chain (CHAIN_LOG_RANGE). */
    logRange?: (chain: string) => number,
    /** The chains it sweeps on: their series start at 0, so the alert's increase() counts the first failure. */
    chains: readonly string[] = [],
    /** Blocks below the head a log lookup with no start would read (UNKNOWN_START_LOOKBACK_BLOCKS); tests shrink it. */
    lookback?: number,
  ) {
    this.deposits = new PayoutDeposits(relayers, config, logRange, lookback);
    for (const chain of chains) {
      for (const outcome of ['swept', 'found', 'failed']) this.counter.inc({ chain, outcome }, 0);
      sweepUnresolved().inc({ chain, reason: 'deposit_address_retired' }, 0);
      refundWithheld().inc({ chain, reason: 'deposit_minted' }, 0);
    }
  }

  /**
   * Whether this payout's own sweep already landed (a lost answer, or an off-ramp that refused the transfer after
   * it): its funds are at the off-ramp. False for a test-helper deposit and before any sweep.
   */
  async swept(payout: PayoutState, merchantId: string): Promise<boolean> {
    if (!payout.deposit || payout.deposit.simulated) return false;
    return this.deposits.isSwept({
      merchantId,
      customerId: payout.customerId,
      chain: payout.token.chain,
      payoutId: payout.id,
      deposit: payout.depositAddress,
    });
  }

  /**
   * This payout's sweep on the chain as it is now, whatever became of its deposit: a reorg may have orphaned the
   * deposit and the sweep, and the sweep may have been mined again on the new fork (with other funds of the shared
   * address, when the deposit was not). Its hash, or null when nothing of this payout left the address on this
   * chain. Looked up from the payout's creation (`sinceCreation`): the deposit's block, where a lookup would start
   * otherwise, may be gone (a rare path, so the wider read is fine).
   */
  async sweepOnChain(payout: PayoutState, merchantId: string): Promise<string | null> {
    const chain = payout.token.chain;
    // Its own address, not the one the configuration gives its customer now (PAYOUT_OFF_RAMP_ADDRESS rotated since).
    const ref = {
      merchantId,
      customerId: payout.customerId,
      chain,
      payoutId: payout.id,
      deposit: payout.depositAddress,
    };
    if (!(await this.deposits.isSwept(ref))) return null;
    const [own] = await this.deposits.sweeps({
      ...ref,
      token: tokenAddress(payout.token.asset),
      fromBlock: await this.sinceCreation(payout),
    });
    // The deposit says it swept the payout and the lookup covered every block since the payout existed: a node that
    // does not serve those logs (pruned). Retried, then parked (docs/payouts.md, "Reorgs").
    if (!own) throw new Error(`payout ${payout.id} is swept but its PayoutSwept log was not found`);
    return own.txHash;
  }

  /**
   * The first block a sweep of `payout` can be in: none is older than the payout (its id is bound into the sweep),
   * however long its flow waited (a parked step, a stopped process), where a fixed lookback below the head (200,000
   * blocks, days on a fast chain) would miss it and the step would fail for ever. A margin covers a clock that runs
   * ahead of the chain's.
   */
  private async sinceCreation(payout: PayoutState): Promise<number> {
    return blockMinedBefore(this.relayers.for(payout.token.chain).provider, payout.createdAt);
  }

  /**
   * After a reorg orphaned `orphaned`, this payout's sweep: the same transaction mined again on the new fork (a node
   * re-includes an orphaned transaction that is still valid), checked by its receipt first, else another sweep of
   * this payout (`sweepOnChain`); null when none is canonical.
   */
  async sweptAgain(payout: PayoutState, orphaned: string, merchantId: string): Promise<string | null> {
    const receipt = await this.relayers.for(payout.token.chain).provider.getTransactionReceipt(orphaned);
    if (receipt?.status === 1) return orphaned;
    return this.sweepOnChain(payout, merchantId);
  }

  /**
   * Whether the payout's deposit address is not this deployment's for its customer: made by an older
   * PayoutDepositFactory (whose bytecode, hence addresses, changed with the bounded sweep and again with the bounded
   * refund) or for another off-ramp. Its funds can never be swept from here, so the flow fails the payout
   * `deposit_address_retired` instead of retrying a sweep forever.
   */
  retired(payout: PayoutState, merchantId: string): boolean {
    return isRetiredAddress(this.deposits, payout, merchantId);
  }

  /**
   * A sweep signed for this payout (`PayoutSweepSent`) that a node holds in its pool, not mined yet: the flow stopped
   * after broadcasting it, and it may still land. Null when every one is mined or unknown to the node (dropped, never
   * broadcast: then it never moves anything, its nonce being taken by another transaction of the key or by none).
   */
  async sweepInFlight(payout: PayoutState): Promise<string | null> {
    const provider = this.relayers.for(payout.token.chain).provider;
    for (const txHash of [...payout.sentSweepTxHashes].reverse()) {
      const tx = await provider.getTransaction(txHash);
      if (tx !== null && tx.blockNumber === null) return txHash;
    }
    return null;
  }

  /**
   * Replaces `txHash`, a sweep of `payout` still in a node's pool whose deposit a reorg retracted, by a no-op at its
   * nonce (ChainRelayer.cancel): mined, it would move the deposit's amount out of the shared address, which without
   * the deposit is other deposits' held funds, and it would stand as the payout's one sweep (the deposit sweeps a
   * payout once) whatever deposit funds the payout later. The replacement's hash; null, nothing sent, when the
   * deposit's transaction is on chain again (a re-included transfer the indexer has not reported yet: the sweep then
   * moves the right funds and is waited for) or the sweep was mined or dropped meanwhile.
   */
  async cancelInFlight(payout: PayoutState, txHash: string, depositTxHash: string): Promise<string | null> {
    const relayer = this.relayers.for(payout.token.chain);
    if ((await relayer.provider.getTransactionReceipt(depositTxHash))?.status === 1) return null;
    const outcome = await relayer.cancel(txHash);
    if (outcome.kind !== 'replaced') return null;
    this.logger.warn({
      msg: "payout sweep pending without its deposit replaced by a no-op at its nonce: it can no longer take the address's held funds",
      payout: payout.id,
      chain: payout.token.chain,
      sweepTxHash: txHash,
      nonce: outcome.nonce,
      noopTxHash: outcome.txHash,
    });
    return outcome.txHash;
  }

  /**
   * The sweep's transaction hash; null for a test-helper deposit (no transaction put anything there). `sent` is
   * told each signed sweep before it is broadcast (PayoutSweepSent), and throwing there keeps it from going out.
   */
  async sweep(
    payout: PayoutState,
    merchantId: string,
    sent?: (tx: { readonly txHash: string; readonly nonce: number }) => Promise<void>,
  ): Promise<string | null> {
    const deposit = payout.deposit;
    if (!deposit) throw new Error(`payout ${payout.id} has no deposit to sweep`);
    if (deposit.simulated) return null;
    const chain = payout.token.chain;
    const request: PayoutSweepRequest = {
      merchantId,
      customerId: payout.customerId,
      chain,
      token: tokenAddress(payout.token.asset),
      amount: BigInt(deposit.amount),
      payoutId: payout.id,
      ...(sent ? { beforeBroadcast: sent } : {}),
    };
    try {
      // An address of another factory or off-ramp (a rotation, a redeployed factory) is not this sweep's to empty;
      // this payout's own sweep there, made before the rotation (a lost answer, a crash), is found and answered.
      if (this.retired(payout, merchantId)) {
        const found = await this.sweepOnChain(payout, merchantId);
        if (found !== null) {
          this.counter.inc({ chain, outcome: 'found' });
          return found;
        }
        throw new Error(
          `the payout's deposit address ${payout.depositAddress} is not the configured factory's and off-ramp's (${this.deposits.address(request)})`,
        );
      }
      // A reorg deeper than the confirmation depth may have taken the deposit before the indexer's retraction reached
      // the payout: the address's balance would then be other deposits' funds (docs/payouts.md, "Reorgs").
      const landed = await this.relayers.for(chain).provider.getTransactionReceipt(deposit.txHash);
      if (landed?.status !== 1)
        throw new Error(`deposit transaction ${deposit.txHash} is not on ${chain}: nothing is swept for it`);
      const outcome = await this.deposits.sweep(request);
      if (outcome.kind === 'swept') {
        this.counter.inc({ chain, outcome: 'swept' });
        this.logger.log({
          msg: 'payout deposit swept to the off-ramp',
          payout: payout.id,
          txHash: outcome.txHash,
          amount: String(outcome.amount),
          deployed: outcome.deployed,
        });
        return outcome.txHash;
      }
      if (outcome.kind === 'insufficient_balance')
        throw new Error(
          `sweep refused: the deposit address holds ${outcome.available}, less than the payout's ${outcome.amount}`,
        );
      if (outcome.kind !== 'already_swept')
        throw new Error(
          `sweep ${outcome.kind}: ${'errorName' in outcome ? outcome.errorName : outcome.txHash}`,
        );
      const found = await this.ownSweep(request, payout);
      this.counter.inc({ chain, outcome: 'found' });
      return found;
    } catch (error) {
      this.counter.inc({ chain, outcome: 'failed' });
      this.logger.error({
        msg: 'payout sweep failed, the flow retries it',
        payout: payout.id,
        chain,
        error: String(error),
      });
      throw error;
    }
  }

  /**
   * This payout's sweep, which the chain says is there: from the deposit's block, else from the payout's creation. A
   * sweep precedes its deposit's block only after a reorg: the deposit retracted after its sweep landed, the sweep
   * mined again on the new fork (with other funds of the shared address) and the same transfer re-included after it
   * (docs/payouts.md, "Reorgs").
   */
  private async ownSweep(request: PayoutSweepRequest, payout: PayoutState): Promise<string> {
    const depositTx = payout.deposit?.txHash ?? '';
    const receipt = await this.relayers.for(request.chain).provider.getTransactionReceipt(depositTx);
    if (!receipt) throw new Error(`deposit transaction ${depositTx} not found on ${request.chain}`);
    const sinceDeposit = await this.deposits.sweeps({ ...request, fromBlock: receipt.blockNumber });
    const [own] =
      sinceDeposit.length > 0
        ? sinceDeposit
        : await this.deposits.sweeps({ ...request, fromBlock: await this.sinceCreation(payout) });
    // The deposit refused the sweep as done, so the log exists; not finding it is a lagging or pruned node: retry.
    if (!own)
      throw new Error(`payout ${request.payoutId} already swept but its PayoutSwept log was not found`);
    return own.txHash;
  }
}

/** Whether `payout`'s deposit address differs from what the configured factory and off-ramp give its customer. */
export function isRetiredAddress(deposits: PayoutDeposits, payout: PayoutState, merchantId: string): boolean {
  return (
    getAddress(payout.depositAddress) !== deposits.address({ merchantId, customerId: payout.customerId })
  );
}

/** The ERC-20 address of a CAIP-19 asset id (`eip155:8453/erc20:0x...`). */
export function tokenAddress(asset: string): string {
  const address = asset.slice(asset.lastIndexOf(':') + 1);
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw new Error(`not an ERC-20 asset id: ${asset}`);
  return address;
}
