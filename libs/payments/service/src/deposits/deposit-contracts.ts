import { Interface, getAddress } from 'ethers';
import {
  PaymentDepositAbi,
  PaymentFactoryAbi,
  PaymentMethod,
  computeDepositAddress,
  connectStablepayRegistry,
  toOnChainId,
} from '@stablepay/contracts';
import { findLogsSince } from '@stablepay/evm';
import type { RelayerSet } from '@stablepay/relayer';
import { DEPOSIT_OUTFLOW_EVENTS, type OutflowKind } from '../chain/deposit-chain';

const FACTORY = new Interface(PaymentFactoryAbi);
const DEPOSIT = new Interface(PaymentDepositAbi);

/** PaymentDeposit.MAX_AUTHORIZATION_PERIOD (30 days): the contract refuses an expiry further than this. */
const MAX_AUTHORIZATION_PERIOD = 30n * 86_400n;
/**
 * The expiry is computed from the latest block, but the contract checks it against the block that mines the deploy,
 * which is later: without a margin an escrow asked for the minimum period (1 hour) is refused every time
 * (InvalidAuthorizationExpiry). The merchant gets at least the period asked for.
 */
const AUTHORIZATION_EXPIRY_MARGIN = 120n;

const METHOD_NAMES: Readonly<Record<number, 'DIRECT' | 'TWO_STEP' | 'NONE'>> = {
  [PaymentMethod.DIRECT]: 'DIRECT',
  [PaymentMethod.TWO_STEP]: 'TWO_STEP',
  [PaymentMethod.NONE]: 'NONE',
};

export interface DeployRequest {
  readonly chain: string;
  readonly merchantId: string;
  readonly onChainPaymentId: string;
  /** The payment's recorded deposit address (where its funds are): the deploy must put the clone there. */
  readonly depositAddress: string;
  readonly method: 'DIRECT' | 'TWO_STEP' | 'NONE';
  readonly token: string;
  readonly payer: string;
  readonly amount: bigint;
  /** TWO_STEP: seconds from the chain's time now until the escrow can no longer be captured. */
  readonly authorizationPeriodSeconds: number | null;
  /**
   * The earliest block of a transfer into the deposit address (null: none recorded). The deploy follows the
   * funding, so an earlier attempt's DepositDeployed log lies at or past it.
   */
  readonly fundedFromBlock: number | null;
}

/** One movement out of a deposit contract, read from its log on chain. */
export interface DepositOutflowSeen {
  readonly kind: OutflowKind;
  readonly txHash: string;
  readonly logIndex: number;
  readonly blockNumber: number;
  readonly blockHash: string;
  /** Token address (checksummed); the zero address for the native coin. */
  readonly token: string;
  readonly to: string;
  readonly amount: bigint;
}

export type DeployOutcome =
  | {
      readonly kind: 'deployed';
      readonly txHash: string;
      /**
       * What the chain deployed (DepositDeployed's method), not what was asked: a NONE deploy asked for after a reorg
       * failed the payment can find the earlier DIRECT or TWO_STEP deploy landed again on the new fork.
       */
      readonly method: 'DIRECT' | 'TWO_STEP' | 'NONE';
      readonly payer: string;
      readonly payerFinalAt: Date;
      readonly settlement: string;
      readonly amount: bigint;
      readonly authorizationExpiry: Date | null;
    }
  | { readonly kind: 'retry'; readonly error: string };

/**
 * The operator's PaymentFactory calls for the deposit flow. `deployDeposit` attests the payer the chain showed us
 * (the funding transfer's sender); the deployment facts come from the receipt's own logs (DepositDeployed,
 * PayerAttested), not from what we asked for. A deposit already deployed (an earlier attempt whose answer was lost)
 * is read back from its DepositDeployed log.
 */
export class DepositContracts {
  constructor(
    private readonly relayers: RelayerSet,
    private readonly paymentFactory: string,
    private readonly registry: string,
    /** Most blocks per eth_getLogs window on a chain (CHAIN_LOG_RANGE). */
    private readonly logRange: (chain: string) => number,
  ) {}

  /** What the chain's StablepayRegistry holds for the merchant (zero addresses when it is not registered). */
  async merchantOnChain(chain: string, merchantId: string): Promise<{ signer: string; settlement: string }> {
    const registry = connectStablepayRegistry(this.registry, this.relayers.for(chain).provider);
    const [signer, settlement] = (await registry.merchant(toOnChainId(merchantId))) as unknown as [
      string,
      string,
    ];
    return { signer: getAddress(signer), settlement: getAddress(settlement) };
  }

  /**
   * Null when this factory deploys the payment at its recorded deposit address, else why not. CREATE2 binds the
   * address to the factory and its bytecode: a payment created under another factory (PAYMENT_FACTORY_ADDRESS
   * overriding the computed one, rotated roles, a new contract version) would be deployed elsewhere, its funds left
   * where nothing can move them, and a NONE deploy recorded as this payment's deployment. Such a payment waits
   * (retried, logged) until the factory that computed its address is the one configured.
   */
  private foreignAddress(
    merchantId: string,
    onChainPaymentId: string,
    depositAddress: string,
  ): string | null {
    const ours = computeDepositAddress(this.paymentFactory, toOnChainId(merchantId), onChainPaymentId);
    if (getAddress(ours) === getAddress(depositAddress)) return null;
    return `deposit address ${getAddress(depositAddress)} is not PaymentFactory ${getAddress(this.paymentFactory)}'s (it deploys this payment at ${ours}); nothing sent`;
  }

  async deploy(request: DeployRequest): Promise<DeployOutcome> {
    const foreign = this.foreignAddress(request.merchantId, request.onChainPaymentId, request.depositAddress);
    if (foreign) return { kind: 'retry', error: `deployDeposit refused: ${foreign}` };
    try {
      const relayer = this.relayers.for(request.chain);
      let expiry = 0n;
      if (request.method === 'TWO_STEP') {
        const block = await relayer.provider.getBlock('latest');
        const latest = BigInt(block?.timestamp ?? Math.floor(Date.now() / 1000));
        const period = BigInt(request.authorizationPeriodSeconds ?? 0) + AUTHORIZATION_EXPIRY_MARGIN;
        expiry = latest + (period < MAX_AUTHORIZATION_PERIOD ? period : MAX_AUTHORIZATION_PERIOD);
      }
      const outcome = await relayer.submit({
        to: this.paymentFactory,
        abi: FACTORY,
        data: FACTORY.encodeFunctionData('deployDeposit', [
          toOnChainId(request.merchantId),
          request.onChainPaymentId,
          PaymentMethod[request.method],
          request.token,
          request.payer,
          request.amount,
          expiry,
        ]),
      });
      if (outcome.kind === 'confirmed')
        return this.fromLogs(outcome.txHash, outcome.receipt.logs, request.depositAddress);
      if (outcome.kind === 'simulation_rejected' && outcome.errorName === 'DepositAlreadyDeployed')
        return this.alreadyDeployed(request);
      if (outcome.kind === 'simulation_rejected')
        return { kind: 'retry', error: `deployDeposit rejected: ${outcome.errorName}` };
      if (outcome.kind === 'reverted')
        return { kind: 'retry', error: `deployDeposit reverted: ${outcome.revert?.errorName ?? 'unknown'}` };
      return { kind: 'retry', error: `deployDeposit ${outcome.txHash} not mined in time` };
    } catch (error) {
      return { kind: 'retry', error: error instanceof Error ? error.message : String(error) };
    }
  }

  /** Who sent a transfer to a deposit, and whether it was minted there: `RelayerSet.transferOrigin`. */
  transferOrigin(transfer: {
    chain: string;
    txHash: string;
    from: string;
  }): Promise<{ readonly from: string; readonly minted: boolean }> {
    return this.relayers.transferOrigin(transfer);
  }

  /** Whether a contract is at the deposit address on `chain` now (its deploy is on the chain the node follows). */
  async isDeployed(chain: string, depositAddress: string): Promise<boolean> {
    const code = await this.relayers.for(chain).provider.getCode(depositAddress);
    return code !== '0x';
  }

  /**
   * The deposit contract's outflow logs (capture, refund, reclaim, recover, rescue: DEPOSIT_OUTFLOW_EVENTS) mined in
   * `fromBlock..toBlock`, oldest first, read in windows of the chain's CHAIN_LOG_RANGE: what the indexer's watch of the
   * contract publishes, read again for an operator's re-scan. Before the deployment the address has no logs.
   */
  async outflowsBetween(
    chain: string,
    depositAddress: string,
    fromBlock: number,
    toBlock: number,
  ): Promise<DepositOutflowSeen[]> {
    const logs = await findLogsSince(
      this.relayers.for(chain).provider,
      { address: depositAddress, topics: [], fromBlock },
      { maxRange: this.logRange(chain) },
    );
    const out: DepositOutflowSeen[] = [];
    for (const log of logs) {
      if (log.blockNumber > toBlock || log.removed) continue;
      let parsed;
      try {
        parsed = DEPOSIT.parseLog({ topics: [...log.topics], data: log.data });
      } catch {
        continue;
      }
      const spec = parsed ? DEPOSIT_OUTFLOW_EVENTS[parsed.name] : undefined;
      if (!parsed || !spec) continue;
      out.push({
        kind: spec.kind,
        txHash: log.transactionHash.toLowerCase(),
        logIndex: log.index,
        blockNumber: log.blockNumber,
        blockHash: log.blockHash.toLowerCase(),
        token: getAddress(parsed.args.getValue('token') as string),
        to: getAddress(parsed.args.getValue(spec.to) as string),
        amount: parsed.args.getValue('amount') as bigint,
      });
    }
    return out.sort((a, b) => a.blockNumber - b.blockNumber || a.logIndex - b.logIndex);
  }

  /** `flagPayment` (works before deployment): the deposit can never move its funds. Already flagged is done. */
  async flag(
    chain: string,
    merchantId: string,
    onChainPaymentId: string,
    depositAddress: string,
  ): Promise<{ done: boolean; error?: string }> {
    // Flagging another address would answer done while the payment's own deposit stays unflagged.
    const foreign = this.foreignAddress(merchantId, onChainPaymentId, depositAddress);
    if (foreign) return { done: false, error: foreign };
    try {
      const outcome = await this.relayers.for(chain).submit({
        to: this.paymentFactory,
        abi: FACTORY,
        data: FACTORY.encodeFunctionData('flagPayment', [toOnChainId(merchantId), onChainPaymentId]),
      });
      if (outcome.kind === 'confirmed') return { done: true };
      if (outcome.kind === 'simulation_rejected' && /Flagged/.test(outcome.errorName)) return { done: true };
      return {
        done: false,
        error: outcome.kind === 'simulation_rejected' ? outcome.errorName : outcome.kind,
      };
    } catch (error) {
      return { done: false, error: error instanceof Error ? error.message : String(error) };
    }
  }

  private async alreadyDeployed(request: DeployRequest): Promise<DeployOutcome> {
    const provider = this.relayers.for(request.chain).provider;
    const topic = FACTORY.getEvent('DepositDeployed')?.topicHash ?? '';
    // From the funding's block, in windows: RPC providers refuse a query from block 0 on a real chain.
    const logs = await findLogsSince(
      provider,
      {
        address: this.paymentFactory,
        topics: [topic, toOnChainId(request.merchantId), request.onChainPaymentId],
        fromBlock: request.fundedFromBlock,
      },
      { maxRange: this.logRange(request.chain) },
    );
    const log = logs[logs.length - 1];
    if (!log) return { kind: 'retry', error: 'DepositAlreadyDeployed but no DepositDeployed log found' };
    const receipt = await provider.getTransactionReceipt(log.transactionHash);
    if (!receipt) return { kind: 'retry', error: 'no receipt for the DepositDeployed transaction' };
    return this.fromLogs(log.transactionHash, receipt.logs, request.depositAddress);
  }

  private fromLogs(
    txHash: string,
    logs: readonly { address: string; topics: readonly string[]; data: string }[],
    depositAddress: string,
  ): DeployOutcome {
    let deployed: {
      deposit: string;
      method: number;
      payer: string;
      settlement: string;
      amount: bigint;
      expiry: bigint;
    } | null = null;
    let finalAt: bigint | null = null;
    for (const log of logs) {
      const iface = getAddress(log.address) === getAddress(this.paymentFactory) ? FACTORY : DEPOSIT;
      let parsed;
      try {
        parsed = iface.parseLog({ topics: [...log.topics], data: log.data });
      } catch {
        continue;
      }
      if (parsed?.name === 'DepositDeployed') {
        deployed = {
          deposit: getAddress(String(parsed.args['deposit'])),
          method: Number(parsed.args['method']),
          payer: getAddress(String(parsed.args['payer'])),
          settlement: getAddress(String(parsed.args['settlement'])),
          amount: BigInt(parsed.args['amount'] as bigint),
          expiry: BigInt(parsed.args['authorizationExpiry'] as bigint),
        };
      }
      if (parsed?.name === 'PayerAttested') finalAt = BigInt(parsed.args['finalAt'] as bigint);
    }
    if (!deployed || finalAt === null)
      return { kind: 'retry', error: `no DepositDeployed/PayerAttested log in ${txHash}` };
    if (deployed.deposit !== getAddress(depositAddress))
      return {
        kind: 'retry',
        error: `${txHash} deployed ${deployed.deposit}, not the payment's deposit address ${getAddress(depositAddress)}`,
      };
    const method = METHOD_NAMES[deployed.method];
    if (!method)
      return { kind: 'retry', error: `${txHash} deployed with an unknown method ${deployed.method}` };
    return {
      kind: 'deployed',
      txHash,
      method,
      payer: deployed.payer,
      payerFinalAt: new Date(Number(finalAt) * 1000),
      settlement: deployed.settlement,
      amount: deployed.amount,
      authorizationExpiry: deployed.expiry > 0n ? new Date(Number(deployed.expiry) * 1000) : null,
    };
  }
}
