import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import { type BusMessage, type BusSubscription, EVENT_BUS, type EventBus } from '@stablepay/event-bus';
import { type EventStore, streamHistoryThrough } from '@stablepay/event-store';
import {
  type ChargeFacts,
  chargeObject,
  type FiatContext,
  foldCharge,
  type LedgerWritePath,
} from '@stablepay/ledger-domain';
import { DomainError } from '@stablepay/util';
import { ChargeRecords } from '../charges/changes';
import { ChargeLedgerCommands } from '../charges/charge-ledger.commands';

export const SUBSCRIPTION_TOPIC = 'subscriptions.subscription.v1';
export const SUBSCRIPTION_CHARGES_GROUP = 'charge-ledger.subscription-charges';

/**
 * The facts of the `subscriptions.subscription.v1` topic the ledger reads (a published contract, docs/asyncapi.yaml):
 * typed here by the fields used, so this scope does not import the subscriptions scope.
 */
interface SubscriptionCreatedFacts {
  readonly subscriptionId: string;
  readonly subscriber: string;
  readonly chain: string;
  readonly price: string;
  readonly priceCurrency: string | null;
}
interface ChargeSucceededFacts {
  readonly chargeId: string;
  readonly nonce: number;
  readonly amount: string;
  readonly fee: string;
  readonly txHash: string;
  readonly blockNumber: string;
  readonly chargedAt: string;
  readonly writtenBy: LedgerWritePath;
  /** The fiat amount the charge's quote converted (absent on facts written before it was recorded). */
  readonly quotedFiatAmount?: string;
}
interface ChargeFailedFacts {
  readonly chargeId: string;
  readonly nonce: number;
  readonly amount: string;
  readonly txHash: string | null;
  readonly failureReason: string;
  readonly failedAt: string;
}

const SUCCEEDED = 'SubscriptionChargeSucceeded.v1';
const FAILED = 'SubscriptionChargeFailed.v1';
const FIRST_CHARGE_REPORTED = 'SubscriptionFirstChargeReported.v1';
const CHARGE_RETRACTED = 'SubscriptionChargeRetracted.v1';
const PAID_REPLACED_SETTLEMENT = 'SubscriptionChargePaidReplacedSettlement.v1';

function succeededFacts(
  base: Pick<ChargeFacts, 'subscriptionId' | 'subscriber' | 'chain'>,
  d: ChargeSucceededFacts,
): ChargeFacts {
  return {
    ...base,
    chargeId: d.chargeId,
    nonce: d.nonce,
    amount: d.amount,
    fee: d.fee,
    txHash: d.txHash,
    blockNumber: d.blockNumber,
    chargedAt: d.chargedAt,
    status: 'succeeded',
    failureReason: null,
  };
}

/**
 * Writes the ledger from the subscription's charge facts. Both write paths meet in the Subscription aggregate first
 * (the charge call's receipt, the subscribe call, the indexer's SubscriptionCharged log: recorded once per nonce, with
 * the path that won), and every charge fact of that stream becomes a `RecordCharge` of the Charge aggregate here,
 * keyed by the same `subc_` id: one ledger row per charge, whichever path came first (SPEC fiat field rule 5), with
 * the fiat fields of rules 1-3 from the plan (SubscriptionCreated) and the merchant's settlement mode. A preflight
 * rejection never reaches the subscription stream, so it never reaches the ledger (rule 7). Event ids derive from the
 * bus message id, so a redelivery appends nothing.
 */
@Injectable()
export class SubscriptionChargesConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('charge-ledger');
  private subscription: BusSubscription | undefined;

  constructor(
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(ChargeLedgerCommands) private readonly commands: ChargeLedgerCommands,
    @Inject(ChargeRecords) private readonly records: ChargeRecords,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.subscription = await this.bus.consume({
      group: SUBSCRIPTION_CHARGES_GROUP,
      topics: [SUBSCRIPTION_TOPIC],
      handler: (message) => this.handle(message),
      onError: (error, message) =>
        this.logger.error({
          msg: 'recording a charge failed, will retry',
          messageId: message.id,
          error: String(error),
        }),
    });
    this.records.projecting = true;
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.records.projecting = false;
    await this.subscription?.stop();
  }

  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  async handle(message: BusMessage): Promise<void> {
    if (
      message.type !== SUCCEEDED &&
      message.type !== FAILED &&
      message.type !== FIRST_CHARGE_REPORTED &&
      message.type !== CHARGE_RETRACTED &&
      message.type !== PAID_REPLACED_SETTLEMENT
    )
      return;
    const merchantId = message.metadata.merchantId;
    const mode = message.metadata.mode;
    if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live'))
      throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
    if (message.type === CHARGE_RETRACTED) {
      // A reorg took the charge's transaction out: the row is marked, never deleted (docs/subscriptions.md, Reorgs).
      const d = message.data as { chargeId: string; txHash: string };
      await this.commands.run(
        d.chargeId,
        { merchantId, mode },
        { type: 'RecordLostToReorg', txHash: d.txHash, now: this.commands.now() },
        message.id,
      );
      return;
    }
    if (message.type === PAID_REPLACED_SETTLEMENT) {
      // The charge paid an address the off-ramp no longer credits: its fiat settlement (if open) fails now.
      const { chargeId } = message.data as { chargeId: string };
      await this.failPaidReplacedAddress(chargeId, { merchantId, mode }, message.id);
      return;
    }
    // Only the API path's rows carry fiat fields (rule 1); its settlement mode is read beside the history.
    const apiPath = message.type !== SUCCEEDED || (message.data as ChargeSucceededFacts).writtenBy === 'api';
    const [history, settlement] = await Promise.all([
      streamHistoryThrough(this.store, { ...message, streamId: message.key }),
      apiPath ? this.settlementMode(merchantId) : Promise.resolve(null),
    ]);
    const first = history[0];
    if (first?.type !== 'SubscriptionCreated.v1')
      throw new Error(`stream ${message.key} does not start with SubscriptionCreated.v1`);
    const created = first.data as SubscriptionCreatedFacts;
    // The wallet charged is the subscriber as of this charge (a migration moves later charges to the new wallet).
    let subscriber = created.subscriber;
    for (const e of history)
      if (e.type === 'SubscriptionMigrated.v1')
        subscriber = (e.data as { newSubscriber: string }).newSubscriber;
    const base = { subscriptionId: created.subscriptionId, subscriber, chain: created.chain };

    let recorded: { charge: ChargeFacts; writtenBy: LedgerWritePath; quotedFiatAmount?: string } | null;
    if (message.type === FIRST_CHARGE_REPORTED) {
      // The subscribe call reported the first charge the indexer had recorded: the same facts again, from the API
      // path this time, so the ledger backfills the first charge's fiat fields (rule 3).
      const { chargeId } = message.data as { chargeId: string };
      const charge = history.find(
        (e) => e.type === SUCCEEDED && (e.data as ChargeSucceededFacts).chargeId === chargeId,
      );
      if (!charge) throw new Error(`${message.key} reports charge ${chargeId} that it never recorded`);
      recorded = { charge: succeededFacts(base, charge.data as ChargeSucceededFacts), writtenBy: 'api' };
    } else if (message.type === SUCCEEDED) {
      const d = message.data as ChargeSucceededFacts;
      recorded = {
        charge: succeededFacts(base, d),
        writtenBy: d.writtenBy,
        ...(d.quotedFiatAmount !== undefined ? { quotedFiatAmount: d.quotedFiatAmount } : {}),
      };
    } else {
      const d = message.data as ChargeFailedFacts;
      recorded = {
        writtenBy: 'api',
        charge: {
          ...base,
          chargeId: d.chargeId,
          nonce: d.nonce,
          amount: d.amount,
          fee: '0',
          txHash: d.txHash,
          blockNumber: '0',
          chargedAt: d.failedAt,
          status: 'failed',
          failureReason: d.failureReason,
        },
      };
    }
    const { charge, writtenBy, quotedFiatAmount } = recorded;
    // A fact without quotedFiatAmount (older writers, the subscribe call) settles at the plan price, as it did.
    const fiatContext: FiatContext | null =
      writtenBy === 'api'
        ? {
            price: created.price,
            priceCurrency: created.priceCurrency,
            settlement: settlement ?? (await this.settlementMode(merchantId)),
            quotedFiatAmount: quotedFiatAmount ?? null,
          }
        : null;
    try {
      const { revision, newEvents } = await this.commands.run(
        charge.chargeId,
        { merchantId, mode },
        { type: 'RecordCharge', charge, writtenBy, fiatContext, now: this.commands.now() },
        message.id,
        // A charge fact normally opens its charge stream (the aggregate records each nonce once); the first
        // charge reported again by the subscribe call backfills a row that exists.
        { expectNew: message.type !== FIRST_CHARGE_REPORTED },
      );
      // A first charge the indexer wrote, announced as paying a replaced address before the subscribe call reported
      // it: the settlement the backfill just opened cannot pay out either.
      if (
        message.type === FIRST_CHARGE_REPORTED &&
        history.some(
          (e) =>
            e.type === PAID_REPLACED_SETTLEMENT &&
            (e.data as { chargeId: string }).chargeId === charge.chargeId,
        )
      )
        await this.failPaidReplacedAddress(charge.chargeId, { merchantId, mode }, `${message.id}:replaced`);
      // A charge stream this message opened holds exactly the new events: announced (committed) with the object
      // the projection writes for them, which the charge call answers with (ChargeLedgerReader.recorded).
      if (newEvents.length > 0 && revision === newEvents.length - 1) {
        const recorded = { id: charge.chargeId, revision, object: chargeObject(foldCharge(newEvents)) };
        this.records.stage(message.id, recorded);
        this.records.committed(message.id, charge.chargeId, revision);
      }
    } catch (error) {
      // A fact the ledger refuses (charge_conflict: another transaction for a recorded charge) will be refused on
      // every redelivery: reported, not retried for ever (a reorg retraction is the path that may replace it).
      if (error instanceof DomainError) {
        this.logger.error({ msg: 'charge refused by the ledger', messageId: message.id, code: error.code });
        return;
      }
      throw error;
    }
  }

  /** Decided on the charge's stream: nothing when it has no open fiat settlement (see the decider). */
  private async failPaidReplacedAddress(
    chargeId: string,
    owner: { merchantId: string; mode: 'test' | 'live' },
    key: string,
  ): Promise<void> {
    await this.commands.run(
      chargeId,
      owner,
      { type: 'RecordPaidReplacedSettlementAddress', now: this.commands.now() },
      key,
    );
  }

  private async settlementMode(merchantId: string): Promise<'crypto' | 'fiat'> {
    const rows: Array<{ settlement_mode: 'crypto' | 'fiat' }> = await this.dataSource.query(
      'SELECT settlement_mode FROM merchant_settings WHERE merchant_id = $1',
      [merchantId],
    );
    return rows[0]?.settlement_mode ?? 'crypto';
  }
}
