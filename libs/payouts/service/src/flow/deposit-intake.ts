import { Inject, Injectable } from '@nestjs/common';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { type PayoutDeposit, type PayoutState, payoutStreamId } from '@stablepay/payouts-domain';
import { DomainError } from '@stablepay/util';
import { DataSource } from 'typeorm';
import { PayoutsAggregates, type Appended } from '../aggregates';
import { foldPayout } from '../read-model/objects';
import { type CustomerRow, type PayoutRow, PayoutsReader } from '../read-model/payouts.reader';

export interface ObservedDeposit {
  readonly chain: string;
  /** Token symbol. */
  readonly token: string;
  /** Token minor units. */
  readonly amount: string;
  readonly from: string;
  readonly txHash: string;
  readonly logIndex: number;
  /** The block the observation came from: a log re-included in another block after a reorg is a new deposit fact. */
  readonly blockHash?: string;
  /** The test helper's: no transaction behind it (the flow then has nothing to sweep). */
  readonly simulated?: boolean;
  /** Minted straight to the address: `from` sent the minting transaction (PayoutDeposit.minted). */
  readonly minted?: boolean;
}

/** What the claim keys of one transaction's transfers start with. */
const claimPrefix = (d: { readonly chain: string; readonly txHash: string }): string =>
  `deposit:${d.chain}:${d.txHash}:`;

/** One transfer log in one block: a log re-included in another block after a reorg is another deposit. */
const claimKey = (d: {
  readonly chain: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly blockHash?: string;
}): string => `${claimPrefix(d)}${d.logIndex}${d.blockHash ? `:${d.blockHash}` : ''}`;

/**
 * Crypto arrived at a customer's deposit address (the chain's observation, or the test helper): the oldest of the customer's payouts awaiting exactly this deposit (chain, token, amount) takes
 * it (PayoutDepositDetected.v1 -> payout.deposit_detected). A deposit no payout waits for funds nothing and is
 * answered as such (docs/payouts.md, "Deposits").
 */
@Injectable()
export class DepositIntake {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async record(customer: CustomerRow, deposit: ObservedDeposit): Promise<Appended | null> {
    // A customer no longer active (suspended, ...) funds nothing: the deposit stays at its address, held for
    // compliance. Its row may lag a suspension; the step before the off-ramp rechecks the customer's own stream.
    if (customer.status !== 'active') return null;
    const key = claimKey(deposit);
    // A deposit funds one payout, once: the claim names the payout it went to, so a redelivered observation (the bus
    // is at-least-once) or a retried test-helper call goes back to that payout, never to the next one waiting while
    // the read model still shows this one awaiting (which paid one deposit out twice).
    const claimed = await this.claimant(key);
    if (claimed) {
      const appended = await this.offer(claimed, deposit, key);
      if (appended) return appended;
      await this.release(key, claimed.id); // it took another deposit meanwhile: this one is free again
    }
    if (deposit.blockHash && (await this.keptBySweptPayout(customer.id, deposit, key))) return null;
    const holder = await this.heldUnclaimed(customer.id, deposit);
    if (holder) {
      await this.dataSource.query(
        `INSERT INTO payout_deposit_claims (claim_key, payout_id) VALUES ($1, $2) ON CONFLICT (claim_key) DO NOTHING`,
        [key, holder.id],
      );
      return this.offer(holder, deposit, key);
    }
    const awaiting = await this.reader.payoutsAwaiting(customer.id, deposit);
    const former = deposit.blockHash ? await this.fundedBefore(customer.id, deposit) : undefined;
    // The read model can lag behind a deposit recorded a moment ago (two deposits in a row): a payout already funded
    // by another deposit refuses this one (409) and the next candidate is offered it.
    for (const payout of former ? [former, ...awaiting.filter((p) => p.id !== former.id)] : awaiting) {
      const won: unknown[] = await this.dataSource.query(
        `INSERT INTO payout_deposit_claims (claim_key, payout_id) VALUES ($1, $2)
         ON CONFLICT (claim_key) DO NOTHING RETURNING payout_id`,
        [key, payout.id],
      );
      if (won.length === 0) {
        // A concurrent delivery of the same deposit claimed it first: it goes where that one put it.
        const other = await this.claimant(key);
        return other ? this.offer(other, deposit, key) : null;
      }
      const appended = await this.offer(payout, deposit, key);
      if (appended) return appended;
      await this.release(key, payout.id);
    }
    return null;
  }

  /**
   * A transfer a reorg re-included in another block, whose payout was swept before the retraction and so kept the
   * deposit (docs/payouts.md, "Reorgs"): still that payout's, claimed for it under the new block, funding no other,
   * and recorded on it (PayoutDepositReincluded.v1 while its sweep is orphaned) for the flow to redo or find the
   * sweep from it. Given to the next payout waiting for the same amount, it would be swept a second time. The log
   * index can differ in the new block, so the transfer is matched by transaction, sender, amount and token
   * (sameTransfer), and a payout already holding another log of the transaction in this block is passed over (a batch
   * sender's transfers). The payouts are found by the read model (the deposit was projected before its sweep, long
   * before a reorg deeper than the confirmation depth) and read from their streams.
   */
  private async keptBySweptPayout(
    customerId: string,
    deposit: ObservedDeposit,
    key: string,
  ): Promise<boolean> {
    const funded = await this.reader.payoutsFundedBy(deposit.chain, deposit.txHash);
    for (const row of funded.filter((r) => r.customer_id === customerId)) {
      const payout = foldPayout(await this.store.readStream(payoutStreamId(row.id)));
      if (payout.sweepTxHash === null || !sameTransfer(payout, payout.deposit, deposit)) continue;
      const claims: Array<{ claim_key: string }> = await this.dataSource.query(
        'SELECT claim_key FROM payout_deposit_claims WHERE payout_id = $1',
        [row.id],
      );
      if (claims.some((c) => c.claim_key !== key && c.claim_key.endsWith(`:${deposit.blockHash}`))) continue;
      // Its orphaned sweep can be redone from it now (appended before the claim, keyed by it: a redelivery after a
      // crash in between appends nothing twice and still claims it).
      await this.aggregates.payout(
        row.id,
        { merchantId: row.merchant_id, mode: row.mode },
        {
          type: 'RecordDepositReincluded',
          txHash: deposit.txHash,
          logIndex: deposit.logIndex,
          now: this.aggregates.now(),
        },
        `reincluded:${key}`,
      );
      // A concurrent delivery of the same observation that claimed it first decides where it goes.
      await this.dataSource.query(
        `INSERT INTO payout_deposit_claims (claim_key, payout_id) VALUES ($1, $2) ON CONFLICT (claim_key) DO NOTHING`,
        [key, row.id],
      );
      return true;
    }
    return false;
  }

  /**
   * The payout that already holds this very transfer log although no claim under `key` names it: its deposit was
   * claimed before claims were kept, or under the key of an observation that did not carry its block yet. An
   * operator's re-scan (docs/chain-operator.md) publishes such an old log again under a new event id and with its
   * block: offered to the payouts waiting for the same amount, it funded a second payout with one transfer (a held
   * payout's deposit swept to the off-ramp, its refund then short). Found by the read model (the deposit was
   * projected long before) and confirmed from the payout's stream.
   */
  private async heldUnclaimed(customerId: string, deposit: ObservedDeposit): Promise<PayoutRow | undefined> {
    const funded = await this.reader.payoutsFundedBy(deposit.chain, deposit.txHash);
    for (const row of funded.filter((r) => r.customer_id === customerId)) {
      const payout = foldPayout(await this.store.readStream(payoutStreamId(row.id)));
      const held = payout.deposit;
      if (!held || payout.token.chain !== deposit.chain || payout.token.symbol !== deposit.token) continue;
      if (held.txHash.toLowerCase() !== deposit.txHash.toLowerCase()) continue;
      // A fact from before logIndex was kept names the log by its sender and amount.
      if (
        held.logIndex === undefined ? sameTransfer(payout, held, deposit) : held.logIndex === deposit.logIndex
      )
        return row;
    }
    return undefined;
  }

  /**
   * The payout this transfer funded before a reorg retracted it, when that payout waits for a deposit again: the
   * re-included transfer goes back to it, not to the oldest payout waiting for the same amount (docs/payouts.md,
   * "Reorgs"). Its sweep may have landed without it (the flow stopped after sending it, and the sweep was mined
   * again on the new fork with other funds of the shared address): given to another payout, that one's sweep would
   * move the transfer a second time, and the first payout would wait for a deposit that never comes. Found by the
   * transfer's identity: the claims of its transaction (written before each deposit fact, so a retraction the read
   * model has not projected yet is no matter), then, of the payouts of its token, the retracted deposit of each
   * payout's stream, the same transaction, sender and amount; the same log index is preferred (the index can differ
   * in the new block).
   */
  private async fundedBefore(customerId: string, deposit: ObservedDeposit): Promise<PayoutRow | undefined> {
    // Hex, CAIP-2 and the separators hold no LIKE wildcard.
    const rows: Array<{ payout_id: string }> = await this.dataSource.query(
      `SELECT payout_id FROM payout_deposit_claims WHERE claim_key LIKE $1
       GROUP BY payout_id ORDER BY min(claimed_at)`,
      [`${claimPrefix(deposit)}%`],
    );
    const matches: Array<{ id: string; sameLog: boolean }> = [];
    for (const { payout_id: id } of rows) {
      const history = await this.store.readStream(payoutStreamId(id));
      const payout = foldPayout(history);
      if (payout.customerId !== customerId || payout.status !== 'awaiting_deposit') continue;
      const retracted = retractedDeposit(history);
      if (retracted && sameTransfer(payout, retracted, deposit))
        matches.push({ id, sameLog: retracted.logIndex === deposit.logIndex });
    }
    const chosen = matches.find((m) => m.sameLog) ?? matches[0];
    return chosen && this.reader.find('payout', chosen.id);
  }

  /** The payout takes the deposit (the same one again appends nothing); null when it is funded by another. */
  private async offer(payout: PayoutRow, deposit: ObservedDeposit, key: string): Promise<Appended | null> {
    try {
      return await this.aggregates.payout(
        payout.id,
        { merchantId: payout.merchant_id, mode: payout.mode },
        {
          type: 'RecordDeposit',
          txHash: deposit.txHash,
          logIndex: deposit.logIndex,
          from: deposit.from,
          amount: deposit.amount,
          ...(deposit.simulated ? { simulated: true } : {}),
          ...(deposit.minted ? { minted: true } : {}),
          now: this.aggregates.now(),
        },
        key,
      );
    } catch (error) {
      if (error instanceof DomainError && error.code === 'payout_state') return null;
      throw error;
    }
  }

  /**
   * The payout an observed transfer log went to, from its claim: written before the deposit fact, so a reorg's
   * retraction finds it even while the read model has not projected the deposit yet (docs/payouts.md, "Reorgs").
   */
  async claimedBy(observation: {
    readonly chain: string;
    readonly txHash: string;
    readonly logIndex: number;
    readonly blockHash?: string;
  }): Promise<string[]> {
    const { chain, txHash, logIndex } = observation;
    // An observation delivered before it carried its block was claimed without it.
    const keys = [...new Set([claimKey(observation), claimKey({ chain, txHash, logIndex })])];
    const rows: Array<{ payout_id: string }> = await this.dataSource.query(
      'SELECT payout_id FROM payout_deposit_claims WHERE claim_key = ANY($1::text[])',
      [keys],
    );
    return [...new Set(rows.map((r) => r.payout_id))];
  }

  private async claimant(key: string): Promise<PayoutRow | undefined> {
    const rows: Array<{ payout_id: string }> = await this.dataSource.query(
      'SELECT payout_id FROM payout_deposit_claims WHERE claim_key = $1',
      [key],
    );
    const id = rows[0]?.payout_id;
    return id === undefined ? undefined : this.reader.find('payout', id);
  }

  private async release(key: string, payoutId: string): Promise<void> {
    await this.dataSource.query('DELETE FROM payout_deposit_claims WHERE claim_key = $1 AND payout_id = $2', [
      key,
      payoutId,
    ]);
  }
}

/**
 * Whether `held`, a deposit of `payout`, is the transfer observed as `deposit` mined again in another block (its log
 * index may differ there): the same transaction, sender and amount, of the payout's token. One transaction can pay
 * the address the same amount in several tokens (a batch sender): another token's transfer of it is not this one.
 */
function sameTransfer(payout: PayoutState, held: PayoutDeposit | null, deposit: ObservedDeposit): boolean {
  return (
    held !== null &&
    payout.token.chain === deposit.chain &&
    payout.token.symbol === deposit.token &&
    held.txHash.toLowerCase() === deposit.txHash.toLowerCase() &&
    held.from.toLowerCase() === deposit.from.toLowerCase() &&
    held.amount === deposit.amount
  );
}

/** The deposit the payout's last retraction took away (the one detected before it), if any. */
function retractedDeposit(
  history: ReadonlyArray<{ readonly type: string; readonly data: unknown }>,
): PayoutDeposit | null {
  let detected: PayoutDeposit | null = null;
  let retracted: PayoutDeposit | null = null;
  for (const event of history) {
    if (event.type === 'PayoutDepositDetected.v1') detected = event.data as PayoutDeposit;
    else if (event.type === 'PayoutDepositRetracted.v1') retracted = detected;
  }
  return retracted;
}
