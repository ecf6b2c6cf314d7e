import { Logger } from '@nestjs/common';
import { type PayoutChainConfig, PayoutDeposits, type PayoutSweepRequest } from '@stablepay/chain-operator';
import type { PayoutState } from '@stablepay/payouts-domain';
import type { RelayerSet } from '@stablepay/relayer';
import { Counter, register } from 'prom-client';

export const PAYOUT_SWEEPER = Symbol('PAYOUT_SWEEPER');

const SWEEPS_METRIC = 'stablepay_payout_sweeps_total';

function sweepsCounter(): Counter<'chain' | 'outcome'> {
  // Get-or-create: tests and the embedded run host several applications on prom-client's one default registry.
  return (
    (register.getSingleMetric(SWEEPS_METRIC) as Counter<'chain' | 'outcome'> | undefined) ??
    new Counter({
      name: SWEEPS_METRIC,
      help: 'Payout deposit sweeps to the off-ramp by outcome (swept, found: a retry found the earlier sweep; failed: retried by the flow)',
      labelNames: ['chain', 'outcome'],
    })
  );
}

/**
 * The payout flow's on-chain forward (docs/payouts.md, "Flow"): the operator sweeps the customer's deposit address to
 * the off-ramp bound into it (PayoutDeposits.sweep; the first sweep deploys the clone) and answers the transaction.
 *
 * Idempotent across a crash between the transaction and the fact: a retried sweep that finds nothing to sweep looks
 * up the sweeps since the deposit's block and answers the first (the sweep moves the address's whole balance, so the
 * first sweep after the deposit moved it, whichever payout asked for it). Everything else (RPC down, a rejected
 * simulation, a revert, a receipt not in time) throws: the flow's message is retried with the bus's backoff, counted
 * in `stablepay_payout_sweeps_total{outcome="failed"}` and logged; the payout stays `deposit_detected`, never lost.
 */
export class PayoutSweeper {
  private readonly logger = new Logger('payouts.sweep');
  private readonly deposits: PayoutDeposits;
  private readonly counter = sweepsCounter();

  constructor(
    private readonly relayers: RelayerSet,
    config: PayoutChainConfig,
  ) {
    this.deposits = new PayoutDeposits(relayers, config);
  }

  /** The sweep's transaction hash; null for a test-helper deposit (no transaction put anything there). */
  async sweep(payout: PayoutState, merchantId: string): Promise<string | null> {
    const deposit = payout.deposit;
    if (!deposit) throw new Error(`payout ${payout.id} has no deposit to sweep`);
    if (deposit.simulated) return null;
    const chain = payout.token.chain;
    const request: PayoutSweepRequest = {
      merchantId,
      customerId: payout.customerId,
      chain,
      token: tokenAddress(payout.token.asset),
    };
    try {
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
      if (outcome.kind !== 'nothing_to_sweep')
        throw new Error(
          `sweep ${outcome.kind}: ${'errorName' in outcome ? outcome.errorName : outcome.txHash}`,
        );
      const found = await this.earlierSweep(request, deposit.txHash);
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

  private async earlierSweep(request: PayoutSweepRequest, depositTx: string): Promise<string> {
    const receipt = await this.relayers.for(request.chain).provider.getTransactionReceipt(depositTx);
    if (!receipt) throw new Error(`deposit transaction ${depositTx} not found on ${request.chain}`);
    const sweeps = await this.deposits.sweeps({ ...request, fromBlock: receipt.blockNumber });
    const first = sweeps.find(
      (s) => s.blockNumber > receipt.blockNumber || s.logIndex > (receipt.logs.at(-1)?.index ?? -1),
    );
    if (!first) throw new Error(`nothing to sweep and no sweep since deposit ${depositTx}`);
    return first.txHash;
  }
}

/** The ERC-20 address of a CAIP-19 asset id (`eip155:8453/erc20:0x...`). */
function tokenAddress(asset: string): string {
  const address = asset.slice(asset.lastIndexOf(':') + 1);
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw new Error(`not an ERC-20 asset id: ${asset}`);
  return address;
}
