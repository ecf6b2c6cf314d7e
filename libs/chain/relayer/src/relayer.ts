import {
  FeeData,
  FetchRequest,
  JsonRpcProvider,
  Network,
  Wallet,
  getAddress,
  isError,
  isHexString,
  keccak256,
  type Interface,
  type TransactionReceipt,
  type TransactionRequest,
} from 'ethers';
import { decodeRevert, revertDataOf, type RevertReason } from './revert';
import { SerialQueue } from './serial-queue';

/**
 * One relayer per chain: the operator's hot wallet submitting merchant-signed requests (charge, cancel, capture,
 * refund, rescue) on chain.
 *
 * Outcomes a caller acts on are RESULTS, never exceptions: a simulation revert (`simulation_rejected`, never
 * broadcast), a confirmed transaction, a transaction whose receipt reverted, or a receipt that did not arrive in
 * time. Exceptions mean infrastructure trouble (RPC down, relayer out of gas money, ...), and a broadcast that
 * failed for such a reason throws RelayerBroadcastError.
 */
export interface RelayRequest {
  readonly to: string;
  /** ABI-encoded calldata, e.g. `abi.encodeFunctionData('charge', [...])`. */
  readonly data: string;
  /** The target contract's ABI: its custom errors are how a revert gets its name. */
  readonly abi: Interface;
  readonly value?: bigint;
  /** Skips gas estimation; the simulation is then an eth_call. */
  readonly gasLimit?: bigint;
  /**
   * Called with each signed transaction's hash and nonce just before it is broadcast (again after a re-sign on a
   * nonce conflict), in the send queue: a caller that must find its transaction after a crash (still in a node's
   * pool, not mined yet) records it here. Nothing is broadcast when it throws, or does not answer within
   * `beforeBroadcastTimeoutMs`: the send fails with its error and the nonce stays free for the next send. It runs
   * while every other send of the chain waits, hence the deadline: a stalled database of one service must not hold
   * another's broadcasts. A hook that answers after its deadline may still have recorded a hash that is never
   * broadcast, which its owner must take for a transaction a node does not know.
   */
  readonly beforeBroadcast?: (signed: { readonly txHash: string; readonly nonce: number }) => Promise<void>;
}

export interface SimulationPassed {
  readonly kind: 'simulated';
  readonly gasLimit: bigint;
}

/** The contract refused the call in simulation; nothing was broadcast and no nonce was used. */
export interface SimulationRejected extends RevertReason {
  readonly kind: 'simulation_rejected';
}

export interface Broadcast {
  readonly kind: 'broadcast';
  readonly txHash: string;
  readonly nonce: number;
  readonly from: string;
  readonly gasLimit: bigint;
  readonly request: RelayRequest;
}

interface MinedTransaction {
  readonly txHash: string;
  readonly nonce: number;
  readonly blockNumber: number;
  readonly blockHash: string;
  readonly gasUsed: bigint;
  readonly effectiveGasPrice: bigint;
  /** Native-currency wei paid: gasUsed * effectiveGasPrice. */
  readonly fee: bigint;
  readonly receipt: TransactionReceipt;
}

export interface Confirmed extends MinedTransaction {
  readonly kind: 'confirmed';
}

/**
 * Mined with status 0. `revert` is decoded by replaying the call against the state at the end of its block
 * (best effort: null when the replay does not revert, e.g. the state that made it fail changed again later in the
 * same block). Out-of-gas and other data-less reverts come back as `UnknownRevert`.
 */
export interface Reverted extends MinedTransaction {
  readonly kind: 'reverted';
  readonly revert: RevertReason | null;
}

/** Not mined with the requested confirmations in time; the transaction may still land: `waitForReceipt(broadcast)`. */
export interface ReceiptTimeout {
  readonly kind: 'receipt_timeout';
  readonly txHash: string;
  readonly nonce: number;
  readonly broadcast: Broadcast;
}

/** A request simulated and priced, ready to broadcast (`sendPrepared`). */
export interface Prepared {
  readonly kind: 'prepared';
  readonly request: RelayRequest;
  readonly gasLimit: bigint;
  readonly fees: FeeData;
}

/**
 * What `cancel` did with a transaction of this key:
 * - `replaced`: a 0-value transfer to the relayer itself at its nonce, priced above it, was broadcast (`txHash`); once
 *   that is mined the transaction can never land. Until then a block builder that has not seen the replacement may
 *   still mine the original: ask again.
 * - `mined`: too late, it is in a block (or its nonce was taken otherwise).
 * - `unknown`: the node does not hold it (dropped, replaced already, never broadcast).
 */
export type CancelOutcome =
  | { readonly kind: 'replaced'; readonly nonce: number; readonly txHash: string }
  | { readonly kind: 'mined' }
  | { readonly kind: 'unknown' };

export type SimulationOutcome = SimulationPassed | SimulationRejected;
export type PrepareOutcome = Prepared | SimulationRejected;
export type SendOutcome = SimulationRejected | Broadcast;
export type ReceiptOutcome = Confirmed | Reverted | ReceiptTimeout;
export type RelayOutcome = SimulationRejected | ReceiptOutcome;

export interface WaitOptions {
  /** Blocks on top of (and including) the transaction's block; default from the relayer options. */
  readonly confirmations?: number;
  readonly timeoutMs?: number;
}

export interface RelayerOptions {
  readonly chainId: bigint | number;
  readonly rpcUrl: string;
  readonly privateKey: string;
  /** Default 1. */
  readonly confirmations?: number;
  /** Default 120 s. */
  readonly receiptTimeoutMs?: number;
  /** Block polling interval; default 50 ms (suits anvil; raise it for hosted RPC endpoints). */
  readonly pollingIntervalMs?: number;
  /** Head-room added to the gas estimate, in percent; default 20. */
  readonly gasLimitMarginPercent?: number;
  /** State the simulation runs against; default `latest`. */
  readonly simulationBlockTag?: 'latest' | 'pending';
  /** Re-syncs from the chain after a nonce error at most this many times per send; default 3. */
  readonly maxNonceResyncs?: number;
  /** Deadline of each JSON-RPC request; default 30 s (ethers' own is 300 s, which holds a caller for 5 minutes). */
  readonly rpcTimeoutMs?: number;
  /**
   * How long a receipt wait goes without a receipt before (and between) looking for a nonce gap below the awaited
   * transaction; default 2 s. See `healNonceGap`.
   */
  readonly nonceGapCheckMs?: number;
  /** How long a request's `beforeBroadcast` may take before its send fails, nothing broadcast; default 5 s. */
  readonly beforeBroadcastTimeoutMs?: number;
}

/** Broadcasting failed for a reason other than a nonce conflict. The transaction may still have reached a node. */
export class RelayerBroadcastError extends Error {
  constructor(
    message: string,
    readonly txHash: string,
    readonly nonce: number,
    override readonly cause: unknown,
  ) {
    super(message);
    this.name = 'RelayerBroadcastError';
  }
}

export class ChainRelayer {
  readonly chainId: bigint;
  readonly address: string;
  readonly provider: JsonRpcProvider;
  private readonly wallet: Wallet;
  private readonly confirmations: number;
  private readonly receiptTimeoutMs: number;
  private readonly pollingIntervalMs: number;
  private readonly gasLimitMarginPercent: bigint;
  private readonly simulationBlockTag: 'latest' | 'pending';
  private readonly maxNonceResyncs: number;
  /** Serialises nonce assignment + broadcast, the only part that must not interleave. */
  private readonly sendQueue = new SerialQueue();
  /** The nonce the next broadcast uses; null = ask the chain first. */
  private nextNonce: number | null = null;
  private readonly nonceGapCheckMs: number;
  private readonly beforeBroadcastTimeoutMs: number;
  /**
   * Signed transactions broadcast here whose receipt wait has not ended, by nonce. A node that forgot one (a dropped
   * pool, a reorg) gets these same bytes again: the only thing that may take the nonce of an action still awaited.
   */
  private readonly awaited = new Map<number, { readonly txHash: string; readonly signed: string }>();
  /** Nonces of the receipt waits under way (nonce -> how many): a gap check serves them all at once. */
  private readonly waiting = new Map<number, number>();
  /** One gap check at a time, at most one per `nonceGapCheckMs`: a hundred slow waits must not each ask. */
  private gapCheck: Promise<void> | null = null;
  private lastGapCheckAt = 0;
  /** An open nonce that is not this relayer's to re-send, and since when it has been seen open (`healNonceGap`). */
  private foreignGap: { readonly nonce: number; readonly since: number } | null = null;

  constructor(options: RelayerOptions) {
    this.chainId = BigInt(options.chainId);
    this.pollingIntervalMs = positiveInteger(options.pollingIntervalMs ?? 50, 'pollingIntervalMs');
    // staticNetwork: no eth_chainId round trip per request; cacheTimeout -1: without it ethers serves a cached
    // nonce/block for 250 ms, which breaks back-to-back submissions on a node that mines instantly.
    // batchStallTime 0: ethers otherwise holds every request 10 ms to batch it with later ones, which a relayer
    // pays on each of its sequential calls (simulation, broadcast, receipt); calls made in one tick still share
    // one HTTP request.
    // A plain Network, not ethers' built-in one for the id: the built-in Polygon network carries a plugin that
    // fetches fees from the Polygon gas station over the internet (fees come from our own RPC endpoint instead).
    const network = new Network(`chain-${this.chainId}`, this.chainId);
    const request = new FetchRequest(options.rpcUrl);
    request.timeout = positiveInteger(options.rpcTimeoutMs ?? 30_000, 'rpcTimeoutMs');
    this.provider = new JsonRpcProvider(request, network, {
      staticNetwork: network,
      cacheTimeout: -1,
      pollingInterval: this.pollingIntervalMs,
      batchStallTime: 0,
    });
    this.wallet = new Wallet(options.privateKey, this.provider);
    this.address = this.wallet.address;
    this.confirmations = positiveInteger(options.confirmations ?? 1, 'confirmations');
    this.receiptTimeoutMs = positiveInteger(options.receiptTimeoutMs ?? 120_000, 'receiptTimeoutMs');
    this.gasLimitMarginPercent = BigInt(
      nonNegativeInteger(options.gasLimitMarginPercent ?? 20, 'gasLimitMarginPercent'),
    );
    this.simulationBlockTag = options.simulationBlockTag ?? 'latest';
    this.maxNonceResyncs = nonNegativeInteger(options.maxNonceResyncs ?? 3, 'maxNonceResyncs');
    this.nonceGapCheckMs = positiveInteger(options.nonceGapCheckMs ?? 2_000, 'nonceGapCheckMs');
    this.beforeBroadcastTimeoutMs = positiveInteger(
      options.beforeBroadcastTimeoutMs ?? 5_000,
      'beforeBroadcastTimeoutMs',
    );
  }

  /** Fails fast when the RPC endpoint serves another chain than the one this relayer signs for. */
  async verifyChain(): Promise<void> {
    const reported = BigInt(await this.provider.send('eth_chainId', []));
    if (reported !== this.chainId) {
      throw new Error(`RPC endpoint serves chain ${reported}, the relayer is configured for ${this.chainId}`);
    }
  }

  /**
   * Gas estimation, or an eth_call when the request fixes gasLimit. A revert is a rejection. The estimate is the
   * simulation: it executes the call against the same state and reverts with the same data, so a separate eth_call
   * before it would only add a round trip.
   */
  async simulate(request: RelayRequest): Promise<SimulationOutcome> {
    const call = this.callOf(request);
    try {
      if (request.gasLimit !== undefined) {
        await this.provider.call({ ...call, blockTag: this.simulationBlockTag });
        return { kind: 'simulated', gasLimit: request.gasLimit };
      }
      // With the block tag (ethers' estimateGas sends none, and nodes differ on the default).
      const estimate = BigInt(
        await this.provider.send('eth_estimateGas', [
          this.provider.getRpcTransaction(call),
          this.simulationBlockTag,
        ]),
      );
      return { kind: 'simulated', gasLimit: (estimate * (100n + this.gasLimitMarginPercent)) / 100n };
    } catch (error) {
      const data = revertDataOf(error);
      if (data === null) throw error;
      return { kind: 'simulation_rejected', ...decodeRevert(request.abi, data) };
    }
  }

  /**
   * Simulates and reads the fees (in parallel); broadcasts nothing. A caller may start it beside checks of its own
   * and drop it when they refuse: it only reads the chain.
   */
  async prepare(request: RelayRequest): Promise<PrepareOutcome> {
    const [simulation, fees] = await Promise.all([this.simulate(request), this.provider.getFeeData()]);
    if (simulation.kind === 'simulation_rejected') return simulation;
    return { kind: 'prepared', request, gasLimit: simulation.gasLimit, fees };
  }

  /** Broadcasts a prepared request with the next managed nonce. Does not wait for the receipt. */
  sendPrepared(prepared: Prepared): Promise<Broadcast> {
    return this.sendQueue.run(() =>
      this.broadcastWithManagedNonce(prepared.request, prepared.gasLimit, prepared.fees),
    );
  }

  /** Simulates, then broadcasts with the next managed nonce. Does not wait for the receipt. */
  async send(request: RelayRequest): Promise<SendOutcome> {
    const prepared = await this.prepare(request);
    return prepared.kind === 'simulation_rejected' ? prepared : this.sendPrepared(prepared);
  }

  async waitForReceipt(sent: Broadcast, options: WaitOptions = {}): Promise<ReceiptOutcome> {
    const confirmations = positiveInteger(options.confirmations ?? this.confirmations, 'confirmations');
    const timeoutMs = positiveInteger(options.timeoutMs ?? this.receiptTimeoutMs, 'timeoutMs');
    let receipt: TransactionReceipt | null;
    try {
      receipt = await this.pollReceipt(sent, confirmations, timeoutMs);
    } finally {
      // Once the caller has an outcome the action is theirs to follow up (a reorg, a retry after a timeout): the
      // relayer no longer re-sends it, and fills its nonce with a no-op if the chain loses it.
      if (this.awaited.get(sent.nonce)?.txHash === sent.txHash) this.awaited.delete(sent.nonce);
    }
    if (receipt === null) {
      // The node may have forgotten a transaction of ours without a nonce error (a reorg on a node that does not
      // put orphaned transactions back in its pool, a dropped pool): the cached next nonce then sits above a gap
      // and every later transaction waits behind it. The next send asks the chain's pending count again.
      this.nextNonce = null;
      return { kind: 'receipt_timeout', txHash: sent.txHash, nonce: sent.nonce, broadcast: sent };
    }
    const mined: MinedTransaction = {
      txHash: sent.txHash,
      nonce: sent.nonce,
      blockNumber: receipt.blockNumber,
      blockHash: receipt.blockHash,
      gasUsed: receipt.gasUsed,
      effectiveGasPrice: receipt.gasPrice,
      fee: receipt.fee,
      receipt,
    };
    if (receipt.status === 1) return { kind: 'confirmed', ...mined };
    return { kind: 'reverted', ...mined, revert: await this.replayRevert(sent, receipt.blockNumber) };
  }

  /** simulate -> broadcast -> wait: the one call the services use. */
  async submit(request: RelayRequest, options: WaitOptions = {}): Promise<RelayOutcome> {
    const sent = await this.send(request);
    if (sent.kind === 'simulation_rejected') return sent;
    return this.waitForReceipt(sent, options);
  }

  /**
   * Replaces a pending transaction of this key by a 0-value transfer to itself at the same nonce, with fees a node
   * takes as a replacement (both above the original's by REPLACEMENT_BUMP_PERCENT, and at least the chain's current
   * ones): for an action that must not land any more (a sweep whose deposit a reorg took). Nothing else moves: the
   * nonce is the original's, so later transactions of the key keep theirs. No send queue: no nonce is assigned.
   */
  async cancel(txHash: string): Promise<CancelOutcome> {
    const pending = await this.provider.getTransaction(txHash);
    if (pending === null) return { kind: 'unknown' };
    if (pending.blockNumber !== null) return { kind: 'mined' };
    if (getAddress(pending.from) !== this.address)
      throw new Error(`transaction ${txHash} is ${pending.from}'s, not this relayer's (${this.address})`);
    const bump = (fee: bigint | null): bigint =>
      ((fee ?? 0n) * (100n + REPLACEMENT_BUMP_PERCENT)) / 100n + 1n;
    const current = await this.provider.getFeeData();
    const tip = bump(pending.maxPriorityFeePerGas ?? pending.gasPrice);
    const cap = bump(pending.maxFeePerGas ?? pending.gasPrice);
    const fees =
      current.maxFeePerGas !== null && current.maxPriorityFeePerGas !== null
        ? new FeeData(null, max(cap, current.maxFeePerGas, tip), max(tip, current.maxPriorityFeePerGas))
        : new FeeData(max(cap, current.gasPrice ?? 0n), null, null);
    const signed = await this.signNoop(pending.nonce, fees);
    // The relayer must never put the cancelled bytes back (healNonceGap re-sends what it still awaits).
    if (this.awaited.get(pending.nonce)?.txHash === txHash) this.awaited.delete(pending.nonce);
    try {
      await this.provider.send('eth_sendRawTransaction', [signed]);
    } catch (error) {
      // Mined between the read and the replacement: the original holds the nonce.
      if (/nonce too low|nonce.*(already|expired)/i.test(errorText(error))) return { kind: 'mined' };
      if (!isAlreadyKnown(error)) throw error;
    }
    return { kind: 'replaced', nonce: pending.nonce, txHash: keccak256(signed) };
  }

  /** Stops the provider's polling; the relayer is unusable afterwards. */
  destroy(): void {
    this.provider.destroy();
  }

  private callOf(request: RelayRequest): TransactionRequest {
    if (!isHexString(request.data)) throw new TypeError('RelayRequest.data must be 0x-prefixed hex calldata');
    return { from: this.address, to: getAddress(request.to), data: request.data, value: request.value ?? 0n };
  }

  private async broadcastWithManagedNonce(
    request: RelayRequest,
    gasLimit: bigint,
    fees: FeeData,
  ): Promise<Broadcast> {
    for (let resyncs = 0; ; resyncs++) {
      const nonce = this.nextNonce ?? (await this.provider.getTransactionCount(this.address, 'pending'));
      const signed = await this.wallet.signTransaction({
        ...this.callOf(request),
        ...feeFields(fees),
        chainId: this.chainId,
        nonce,
        gasLimit,
      });
      const txHash = keccak256(signed);
      if (request.beforeBroadcast) await this.beforeBroadcast(request.beforeBroadcast, { txHash, nonce });
      try {
        // Sent as is: ethers' broadcastTransaction parses it again and recovers its sender (an elliptic-curve
        // recovery of our own signature, milliseconds of CPU per transaction) for a response never read here.
        await this.provider.send('eth_sendRawTransaction', [signed]);
      } catch (error) {
        // A retried request whose first attempt did reach the node: the transaction is in, carry on.
        const alreadyInPool = isAlreadyKnown(error);
        if (!alreadyInPool) {
          this.nextNonce = null;
          // Someone else used this key (another process, a manual transfer) or a node forgot our pending
          // transactions: trust the chain's count again and re-sign.
          if (isNonceConflict(error) && resyncs < this.maxNonceResyncs) continue;
          // Unknown outcome: the next send re-reads the pending count, so no gap is left either way.
          throw new RelayerBroadcastError(
            `broadcast of nonce ${nonce} failed: ${errorText(error)}`,
            txHash,
            nonce,
            error,
          );
        }
      }
      this.nextNonce = nonce + 1;
      this.awaited.set(nonce, { txHash, signed });
      // A broadcast nobody waits for stays here; the oldest go first (their nonces are long mined or long lost).
      for (const stale of this.awaited.keys()) {
        if (this.awaited.size <= MAX_AWAITED) break;
        this.awaited.delete(stale);
      }
      return { kind: 'broadcast', txHash, nonce, from: this.address, gasLimit, request };
    }
  }

  /**
   * The request's hook, bounded: it runs in the send queue, so without a deadline a hook that never answers (its
   * database stalled) would hold every later send of the chain, other services' charges and captures among them.
   * Throwing before the broadcast leaves `nextNonce` as it was: the nonce is not used.
   */
  private async beforeBroadcast(
    hook: NonNullable<RelayRequest['beforeBroadcast']>,
    signed: { readonly txHash: string; readonly nonce: number },
  ): Promise<void> {
    const recorded = Promise.resolve().then(() => hook(signed));
    // Settling after the deadline, its rejection has nobody left to handle it.
    recorded.catch(() => undefined);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `beforeBroadcast did not answer within ${this.beforeBroadcastTimeoutMs} ms: nonce ${signed.nonce} not broadcast`,
            ),
          ),
        this.beforeBroadcastTimeoutMs,
      );
    });
    try {
      await Promise.race([recorded, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Own polling rather than provider.waitForTransaction: ethers re-arms its block listener only after an async
   * receipt fetch, so it misses blocks that arrive in a burst (several per poll) and then waits forever.
   */
  private async pollReceipt(
    sent: Broadcast,
    confirmations: number,
    timeoutMs: number,
  ): Promise<TransactionReceipt | null> {
    const deadline = Date.now() + timeoutMs;
    const gapCheckFrom = Date.now() + this.nonceGapCheckMs;
    this.waiting.set(sent.nonce, (this.waiting.get(sent.nonce) ?? 0) + 1);
    try {
      for (;;) {
        const receipt = await this.provider.getTransactionReceipt(sent.txHash);
        // A receipt is one confirmation by itself: only deeper requirements ask for the head (one round trip less).
        if (
          receipt !== null &&
          (confirmations === 1 ||
            (await this.provider.getBlockNumber()) - receipt.blockNumber + 1 >= confirmations)
        ) {
          return receipt;
        }
        if (receipt === null && Date.now() >= gapCheckFrom) await this.checkNonceGap();
        const left = deadline - Date.now();
        if (left <= 0) return null;
        await new Promise((resolve) => setTimeout(resolve, Math.min(this.pollingIntervalMs, left)));
      }
    } finally {
      const left = (this.waiting.get(sent.nonce) ?? 1) - 1;
      if (left === 0) this.waiting.delete(sent.nonce);
      else this.waiting.set(sent.nonce, left);
    }
  }

  private async checkNonceGap(): Promise<void> {
    if (this.gapCheck === null) {
      if (Date.now() - this.lastGapCheckAt < this.nonceGapCheckMs) return;
      this.lastGapCheckAt = Date.now();
      // The highest awaited nonce: any wait above a gap justifies filling it.
      // Best effort: a failed check (RPC trouble, no gas money for a filler) must not fail a wait whose own receipt
      // may still come; the next check tries again, and the wait's timeout is the fallback as before.
      this.gapCheck = this.healNonceGap(Math.max(...this.waiting.keys()))
        .catch(() => undefined)
        .finally(() => {
          this.gapCheck = null;
        });
    }
    await this.gapCheck;
  }

  /**
   * A nonce gap below an awaited transaction never raises an error: the node queues everything above it for ever.
   * It opens when the chain loses a transaction of this key without a nonce error: a reorg drops a mined one and the
   * new fork does not re-mine it, or a node's pool drops a pending one (restart, eviction). The open nonce is the
   * chain's `latest` count while the node's `pending` count equals it (nothing executable there; queued transactions
   * do not count). It is healed, in the send queue so no broadcast of ours interleaves, without ever letting an
   * action run twice:
   * - a transaction broadcast here whose wait has not ended: the same signed bytes again (one hash, one nonce);
   * - any other nonce below the awaited one (an outcome already handed out, another process of the key): a 0-value
   *   transfer to ourselves, which does nothing; whatever held that nonce can then never land, which its owner
   *   already handles (a reorg retraction, a receipt timeout's "may still land, or not"). Only once it has stayed
   *   open for FOREIGN_GAP_GRACE_CHECKS intervals: it may be another process's transaction that process still waits
   *   for and re-sends at its own next check (every process has the same interval); filled at first sight, that
   *   process's capture, sweep or charge was replaced by a no-op and never landed.
   * The awaited transaction's own nonce, when not broadcast here, is left to its caller (it times out as before).
   * A node whose `pending` count includes queued transactions shows no gap here; the receipt timeout's re-sync
   * still applies there.
   */
  private healNonceGap(awaitedNonce: number): Promise<void> {
    return this.sendQueue.run(async () => {
      let checked = -1;
      for (;;) {
        // In one tick, so one batched HTTP request: both counts come from the same node behind a load balancer.
        const [latest, pending] = await Promise.all([
          this.provider.getTransactionCount(this.address, 'latest'),
          this.provider.getTransactionCount(this.address, 'pending'),
        ]);
        if (latest > awaitedNonce || pending > latest) {
          this.foreignGap = null;
          return;
        }
        // `checked`: one attempt per nonce per check, so a node that refuses the fill does not spin here.
        if (latest <= checked) return;
        checked = latest;
        const ours = this.awaited.get(latest);
        if (ours !== undefined) {
          await this.rebroadcast(ours.signed);
        } else if (latest < awaitedNonce) {
          const now = Date.now();
          if (this.foreignGap?.nonce !== latest) {
            this.foreignGap = { nonce: latest, since: now };
            return;
          }
          if (now - this.foreignGap.since < FOREIGN_GAP_GRACE_CHECKS * this.nonceGapCheckMs) return;
          this.foreignGap = null;
          await this.rebroadcast(await this.signNoop(latest, await this.provider.getFeeData()));
        } else {
          return;
        }
        if (latest + 1 > awaitedNonce) return;
      }
    });
  }

  /** A 0-value transfer to itself at `nonce`: a gap filler, or the replacement of a cancelled transaction. */
  private async signNoop(nonce: number, fees: FeeData): Promise<string> {
    const transfer = { from: this.address, to: this.address, value: 0n };
    // Estimated, not 21000: where a transaction also pays its L1 data posting in L2 gas (Arbitrum) a plain transfer
    // needs more, and the node refuses a 21000 filler ("intrinsic gas too low"), leaving the gap open for good.
    const estimate = await this.provider.send('eth_estimateGas', [
      this.provider.getRpcTransaction(transfer),
      'latest',
    ]);
    return this.wallet.signTransaction({
      ...transfer,
      ...feeFields(fees),
      chainId: this.chainId,
      nonce,
      gasLimit: (BigInt(estimate) * (100n + this.gasLimitMarginPercent)) / 100n,
    });
  }

  /** A nonce another sender took meanwhile, or bytes the node already holds, mean the gap is closed: not errors. */
  private async rebroadcast(signed: string): Promise<void> {
    try {
      await this.provider.send('eth_sendRawTransaction', [signed]);
    } catch (error) {
      if (!isAlreadyKnown(error) && !isNonceConflict(error)) throw error;
    }
  }

  private async replayRevert(sent: Broadcast, blockNumber: number): Promise<RevertReason | null> {
    try {
      await this.provider.call({
        ...this.callOf(sent.request),
        gasLimit: sent.gasLimit,
        blockTag: blockNumber,
      });
      return null;
    } catch (error) {
      const data = revertDataOf(error);
      return data === null ? null : decodeRevert(sent.request.abi, data);
    }
  }
}

const MAX_AWAITED = 10_000;
/**
 * Intervals a nonce not awaited here stays open before it is filled: its owner, another process waiting for it,
 * checks once per interval and re-sends it; two give that check a whole interval of margin.
 */
const FOREIGN_GAP_GRACE_CHECKS = 2;
/** Above a pending transaction's fees, in percent, for its replacement (geth and most nodes require 10). */
const REPLACEMENT_BUMP_PERCENT = 30n;

function max(...values: bigint[]): bigint {
  return values.reduce((a, b) => (a > b ? a : b));
}

function feeFields(
  fees: FeeData,
): Pick<TransactionRequest, 'type' | 'maxFeePerGas' | 'maxPriorityFeePerGas' | 'gasPrice'> {
  if (fees.maxFeePerGas !== null && fees.maxPriorityFeePerGas !== null) {
    return { type: 2, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
  }
  if (fees.gasPrice === null)
    throw new Error('the RPC endpoint reports neither EIP-1559 fees nor a gas price');
  return { type: 0, gasPrice: fees.gasPrice };
}

function isNonceConflict(error: unknown): boolean {
  if (isError(error, 'NONCE_EXPIRED') || isError(error, 'REPLACEMENT_UNDERPRICED')) return true;
  return /nonce too (low|high)|invalid nonce|nonce.*(already|expired)/i.test(errorText(error));
}

function isAlreadyKnown(error: unknown): boolean {
  return /already known|known transaction|already imported/i.test(errorText(error));
}

function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const nested = (error as Error & { info?: { error?: { message?: unknown } } }).info?.error?.message;
  return typeof nested === 'string' ? `${error.message} (${nested})` : error.message;
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1)
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

function nonNegativeInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 0)
    throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  return value;
}
