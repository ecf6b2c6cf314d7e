import { Interface, ZeroAddress, getAddress, type TransactionReceipt } from 'ethers';
import {
  PaymentDepositAbi,
  connectPaymentDeposit,
  connectStablepayRegistry,
  connectTestStablecoin,
} from '@stablepay/contracts';
import { DEFAULT_CHAIN_LOG_RANGE, findLogsSince } from '@stablepay/evm';
import type { OutflowKind } from '@stablepay/payments-domain';
import type { ChainRelayer, RelayOutcome } from '@stablepay/relayer';

/**
 * The payments service's view of one PaymentDeposit on one chain: what preflight reads (the deposit's record, the
 * merchant's registered signer and epoch, the chain time, whether a digest was burned) and the calls the relayer
 * submits for a payment after its deposit (capture, refund, rescue, recover, reclaim). Every outcome a caller acts
 * on is a value, never an exception; exceptions mean infrastructure trouble (RPC down, ...).
 */

export type DepositMethod = 'DIRECT' | 'TWO_STEP' | 'NONE';
const METHODS: readonly DepositMethod[] = ['DIRECT', 'TWO_STEP', 'NONE'];

/** PaymentDeposit.payment() plus flagged(), or `deployed: false` while the address holds no code. */
export type DepositRecord =
  | { readonly deployed: false }
  | {
      readonly deployed: true;
      readonly merchantId: string;
      readonly paymentId: string;
      readonly token: string;
      readonly method: DepositMethod;
      /** Zero address after a merchant dispute. */
      readonly payer: string;
      /** Unix seconds; 0 when no payer is attested. */
      readonly payerFinalAt: bigint;
      readonly authorizationExpiry: bigint;
      readonly settlement: string;
      readonly escrowed: bigint;
      readonly flagged: boolean;
    };

export interface MerchantAuth {
  /** Zero address when the merchant is not registered on this chain. */
  readonly signer: string;
  readonly epoch: bigint;
}

export type { OutflowKind };

/** One fund movement out of the deposit, decoded from its log. */
export interface DepositOutflow {
  readonly kind: OutflowKind;
  readonly txHash: string;
  readonly logIndex: number;
  /** The receipt's block: the same transaction in another block is the one a reorg mined again. */
  readonly blockHash: string;
  /** That block's number. */
  readonly blockNumber: number;
  /** Token address (checksummed); the zero address for the native coin. */
  readonly token: string;
  readonly to: string;
  readonly amount: bigint;
  readonly received: bigint;
}

/** A change of the deposit's payer, decoded from its log: the merchant's dispute or the admin's attestation. */
export type DepositPayerEvent =
  | {
      readonly kind: 'disputed';
      readonly txHash: string;
      readonly logIndex: number;
      readonly payer: string;
    }
  | {
      readonly kind: 'attested';
      readonly txHash: string;
      readonly logIndex: number;
      readonly payer: string;
      /** Unix seconds (chain time) when the attested payer becomes final. */
      readonly finalAt: bigint;
    };

export type DepositActionOutcome =
  /** Mined with its confirmations; `outflows` and `payerEvents` are the deposit's own logs in that receipt. */
  | {
      readonly kind: 'confirmed';
      readonly txHash: string;
      readonly blockNumber: number;
      readonly outflows: readonly DepositOutflow[];
      readonly payerEvents?: readonly DepositPayerEvent[];
    }
  /** The contract refused the call in simulation: nothing was broadcast. */
  | { readonly kind: 'rejected'; readonly errorName: string; readonly args: readonly unknown[] }
  /** Mined and reverted (the state moved between simulation and mining). */
  | { readonly kind: 'reverted'; readonly txHash: string; readonly errorName: string | null }
  /** Broadcast, receipt not in time: it may still land (the indexer or a later read records it). */
  | { readonly kind: 'pending'; readonly txHash: string };

export interface SignedEscrowMove {
  readonly token: string;
  readonly amount: bigint;
  readonly deadline: bigint;
  readonly signature: string;
}

const DEPOSIT = new Interface(PaymentDepositAbi);

/** A PaymentDeposit call ready for the relayer. */
export interface DepositCall {
  readonly to: string;
  readonly data: string;
}

const call = (deposit: string, fn: string, args: readonly unknown[]): DepositCall => ({
  to: deposit,
  data: DEPOSIT.encodeFunctionData(fn, args),
});

/** The deposit's events that move funds out of it, with the argument naming the recipient. */
export const DEPOSIT_OUTFLOW_EVENTS: Readonly<
  Record<string, { readonly kind: OutflowKind; readonly to: string } | undefined>
> = {
  PaymentCaptured: { kind: 'captured', to: 'settlement' },
  PaymentRefunded: { kind: 'refunded', to: 'payer' },
  PaymentReclaimed: { kind: 'reclaimed', to: 'payer' },
  PaymentRecovered: { kind: 'recovered', to: 'payer' },
  PaymentRescued: { kind: 'rescued', to: 'to' },
};

/** The deposit's outflow logs in a receipt (logs of other contracts, e.g. the token's Transfer, are skipped). */
export function depositOutflows(receipt: TransactionReceipt, deposit: string): DepositOutflow[] {
  const address = getAddress(deposit);
  const out: DepositOutflow[] = [];
  for (const log of receipt.logs) {
    if (getAddress(log.address) !== address) continue;
    const parsed = DEPOSIT.parseLog({ topics: [...log.topics], data: log.data });
    const spec = parsed ? DEPOSIT_OUTFLOW_EVENTS[parsed.name] : undefined;
    if (!parsed || !spec) continue;
    out.push({
      kind: spec.kind,
      txHash: receipt.hash,
      logIndex: log.index,
      blockHash: receipt.blockHash,
      blockNumber: receipt.blockNumber,
      token: getAddress(parsed.args.getValue('token') as string),
      to: getAddress(parsed.args.getValue(spec.to) as string),
      amount: parsed.args.getValue('amount') as bigint,
      received: parsed.args.getValue('received') as bigint,
    });
  }
  return out;
}

/** The deposit's payer logs in a receipt (PayerDisputed, PayerAttested), in log order. */
export function depositPayerEvents(receipt: TransactionReceipt, deposit: string): DepositPayerEvent[] {
  const address = getAddress(deposit);
  const out: DepositPayerEvent[] = [];
  for (const log of receipt.logs) {
    if (getAddress(log.address) !== address) continue;
    const parsed = DEPOSIT.parseLog({ topics: [...log.topics], data: log.data });
    if (!parsed) continue;
    const payer = () => getAddress(parsed.args.getValue('payer') as string);
    if (parsed.name === 'PayerDisputed') {
      out.push({ kind: 'disputed', txHash: receipt.hash, logIndex: log.index, payer: payer() });
    } else if (parsed.name === 'PayerAttested') {
      out.push({
        kind: 'attested',
        txHash: receipt.hash,
        logIndex: log.index,
        payer: payer(),
        finalAt: parsed.args.getValue('finalAt') as bigint,
      });
    }
  }
  return out;
}

export class DepositChain {
  constructor(
    private readonly relayer: ChainRelayer,
    private readonly registryAddress: string,
    /** Most blocks per eth_getLogs window on this chain (CHAIN_LOG_RANGE). */
    private readonly logRange: number = DEFAULT_CHAIN_LOG_RANGE,
  ) {}

  get chainId(): bigint {
    return this.relayer.chainId;
  }

  /** The operator's address (the relayer key): rescue and recover only pass from it. */
  get operator(): string {
    return this.relayer.address;
  }

  async readDeposit(deposit: string): Promise<DepositRecord> {
    const provider = this.relayer.provider;
    if ((await provider.getCode(deposit)) === '0x') return { deployed: false };
    const contract = connectPaymentDeposit(deposit, provider);
    const [p, flagged, payerFinalAt] = await Promise.all([
      contract.payment(),
      contract.flagged(),
      contract.payerFinalAt(),
    ]);
    return {
      deployed: true,
      merchantId: p.merchantId,
      paymentId: p.paymentId,
      token: getAddress(p.token),
      method: METHODS[Number(p.method)] ?? 'NONE',
      payer: getAddress(p.payer),
      payerFinalAt,
      authorizationExpiry: p.authorizationExpiry,
      settlement: getAddress(p.settlement),
      escrowed: p.escrowed,
      flagged,
    };
  }

  async merchantAuth(onChainMerchantId: string): Promise<MerchantAuth> {
    const registry = connectStablepayRegistry(this.registryAddress, this.relayer.provider);
    const auth = await registry.merchantAuth(onChainMerchantId);
    return { signer: getAddress(auth.signer), epoch: auth.epoch };
  }

  /** The latest block's timestamp: what the contract's deadline and expiry checks compare against. */
  async chainTime(): Promise<bigint> {
    const block = await this.relayer.provider.getBlock('latest');
    if (!block) throw new Error(`chain ${this.chainId}: no latest block`);
    return BigInt(block.timestamp);
  }

  async signatureUsed(deposit: string, digest: string): Promise<boolean> {
    return connectPaymentDeposit(deposit, this.relayer.provider).signatureUsed(digest);
  }

  /** ERC-20 balance, or the native balance for the zero address. */
  async balanceOf(token: string, holder: string): Promise<bigint> {
    if (getAddress(token) === ZeroAddress) return this.relayer.provider.getBalance(holder);
    return connectTestStablecoin(token, this.relayer.provider).balanceOf(holder);
  }

  captureCall(deposit: string, move: SignedEscrowMove): DepositCall {
    return call(deposit, 'capture', [move.token, move.amount, move.deadline, move.signature]);
  }

  refundCall(deposit: string, move: SignedEscrowMove & { readonly payer: string }): DepositCall {
    return call(deposit, 'refund', [move.token, move.payer, move.amount, move.deadline, move.signature]);
  }

  rescueCall(deposit: string, move: SignedEscrowMove & { readonly to: string }): DepositCall {
    return call(deposit, 'rescue', [move.token, move.to, move.amount, move.deadline, move.signature]);
  }

  /** Anyone, with the merchant's DisputePayer signature, within the challenge period: clears the attested payer. */
  disputePayerCall(
    deposit: string,
    dispute: { readonly payer: string; readonly deadline: bigint; readonly signature: string },
  ): DepositCall {
    return call(deposit, 'disputePayer', [dispute.payer, dispute.deadline, dispute.signature]);
  }

  /**
   * The registry admin only (its cold key; nothing in the service signs with it), after a dispute: the call the
   * operator's attestation route hands out for that key to sign and send.
   */
  attestPayerCall(deposit: string, payer: string): DepositCall {
    return call(deposit, 'attestPayer', [payer]);
  }

  /** The registry admin's address on this chain (the only key attestPayer passes from). */
  async registryAdmin(): Promise<string> {
    return getAddress(await connectStablepayRegistry(this.registryAddress, this.relayer.provider).admin());
  }

  /** The payer changes a mined transaction made at `deposit` (for a transaction someone else submitted). */
  async payerEventsOfTransaction(deposit: string, txHash: string): Promise<DepositPayerEvent[]> {
    const receipt = await this.relayer.provider.getTransactionReceipt(txHash);
    return receipt && receipt.status === 1 ? depositPayerEvents(receipt, deposit) : [];
  }

  /** Operator only: everything of the payment token above the escrow, to the final payer. */
  recoverCall(deposit: string): DepositCall {
    return call(deposit, 'recover', []);
  }

  /** Anyone, after the authorization expiry: the remaining escrow to the final payer. */
  reclaimCall(deposit: string): DepositCall {
    return call(deposit, 'reclaim', []);
  }

  capture(deposit: string, move: SignedEscrowMove): Promise<DepositActionOutcome> {
    return this.submit(this.captureCall(deposit, move));
  }

  refund(
    deposit: string,
    move: SignedEscrowMove & { readonly payer: string },
  ): Promise<DepositActionOutcome> {
    return this.submit(this.refundCall(deposit, move));
  }

  rescue(deposit: string, move: SignedEscrowMove & { readonly to: string }): Promise<DepositActionOutcome> {
    return this.submit(this.rescueCall(deposit, move));
  }

  recover(deposit: string): Promise<DepositActionOutcome> {
    return this.submit(this.recoverCall(deposit));
  }

  reclaim(deposit: string): Promise<DepositActionOutcome> {
    return this.submit(this.reclaimCall(deposit));
  }

  /** eth_call + gas estimate from the relayer: the contract's answer without sending anything. */
  async simulate(
    depositCall: DepositCall,
  ): Promise<{ readonly kind: 'simulated' } | Extract<DepositActionOutcome, { kind: 'rejected' }>> {
    const outcome = await this.relayer.simulate({ ...depositCall, abi: DEPOSIT });
    return outcome.kind === 'simulated'
      ? { kind: 'simulated' }
      : { kind: 'rejected', errorName: outcome.errorName, args: outcome.args };
  }

  /** The outflows a mined transaction made from `deposit` (for a transaction someone else submitted). */
  async outflowsOfTransaction(deposit: string, txHash: string): Promise<DepositOutflow[]> {
    const receipt = await this.relayer.provider.getTransactionReceipt(txHash);
    return receipt && receipt.status === 1 ? depositOutflows(receipt, deposit) : [];
  }

  /**
   * Every transaction that emitted a log of the deposit, from the block of `fromTx` (its deployment) on, in chain
   * order: what moved out of it whoever sent it. Read to the head in windows of `logRange` blocks (RPC providers
   * refuse a wide eth_getLogs); without `fromTx` (or its receipt), the last UNKNOWN_START_LOOKBACK_BLOCKS.
   */
  async transactionsFrom(deposit: string, fromTx: string | null): Promise<string[]> {
    const provider = this.relayer.provider;
    const fromBlock = fromTx ? ((await provider.getTransactionReceipt(fromTx))?.blockNumber ?? null) : null;
    const logs = await findLogsSince(
      provider,
      { address: deposit, topics: [], fromBlock },
      { maxRange: this.logRange },
    );
    return [...new Set(logs.map((l) => l.transactionHash))];
  }

  /** Simulates, broadcasts with the operator key and waits for the receipt. */
  async submit(depositCall: DepositCall): Promise<DepositActionOutcome> {
    const deposit = depositCall.to;
    const outcome: RelayOutcome = await this.relayer.submit({ ...depositCall, abi: DEPOSIT });
    switch (outcome.kind) {
      case 'simulation_rejected':
        return { kind: 'rejected', errorName: outcome.errorName, args: outcome.args };
      case 'confirmed':
        return {
          kind: 'confirmed',
          txHash: outcome.txHash,
          blockNumber: outcome.blockNumber,
          outflows: depositOutflows(outcome.receipt, deposit),
          payerEvents: depositPayerEvents(outcome.receipt, deposit),
        };
      case 'reverted':
        return { kind: 'reverted', txHash: outcome.txHash, errorName: outcome.revert?.errorName ?? null };
      case 'receipt_timeout':
        return { kind: 'pending', txHash: outcome.txHash };
    }
  }
}
