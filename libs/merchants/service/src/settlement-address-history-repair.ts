import { Inject, Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { merchantStreamId, type SettlementAddressChanged } from '@stablepay/merchants-domain';
import { JsonLogger, runStartupRepair } from '@stablepay/util';
import { recordSettlementAddressChange } from './settlement-address-history';

/**
 * Merchants (all, or the one of $1) whose settlement address history cannot be the one their stream gives: not
 * exactly one open address, the open one not the address the settings hold, or two intervals that overlap. The
 * projection before c960b94 wrote such histories (a change stamped at or before the open address's start left two
 * open addresses; one in the same millisecond was dropped), and they stayed until the merchant's next change.
 */
const BROKEN_HISTORIES = `
  SELECT s.merchant_id FROM merchant_settings s
   WHERE s.settlement_address IS NOT NULL AND ($1::text IS NULL OR s.merchant_id = $1)
     AND ((SELECT count(*) FROM merchant_settlement_addresses h
            WHERE h.merchant_id = s.merchant_id AND h.valid_to IS NULL) <> 1
       OR NOT EXISTS (SELECT 1 FROM merchant_settlement_addresses h
                       WHERE h.merchant_id = s.merchant_id AND h.valid_to IS NULL
                         AND h.settlement_address = s.settlement_address)
       OR EXISTS (SELECT 1 FROM merchant_settlement_addresses a
                    JOIN merchant_settlement_addresses b
                      ON b.merchant_id = a.merchant_id AND b.valid_from > a.valid_from
                     AND (a.valid_to IS NULL OR a.valid_to > b.valid_from)
                   WHERE a.merchant_id = s.merchant_id))`;

/**
 * At start, rewrites every broken settlement address history (BROKEN_HISTORIES) from the merchant's stream, as the
 * projection writes it now (recordSettlementAddressChange, change by change in stream order). Re-runnable and safe
 * beside other replicas and the projection: a merchant is rebuilt under its settings row's lock, only while it is
 * still broken, from exactly the events the row reflects, so a second run (or replica) finds nothing to do and the
 * projection's next change follows the rebuilt history. A consistent history is never touched, so a merchant whose
 * history starts at its last change before the history existed (CreateSettlementAddressHistory1795708800000) keeps
 * it; a rebuilt one starts at the stream's first address.
 */
@Injectable()
export class SettlementAddressHistoryRepair implements OnApplicationBootstrap {
  private readonly logger = new JsonLogger('settlement-address-history');

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  /**
   * Awaited, so a process serves no charge recording against a history it found broken; a failure (the event store
   * unreachable) is logged and the process starts anyway, as it would have before.
   */
  async onApplicationBootstrap(): Promise<void> {
    await runStartupRepair(this.logger, () => this.repairAll(), {
      repaired: 'settlement address histories rebuilt from their streams',
      failed: 'settlement address history repair failed; it runs again at the next start',
    });
  }

  /** Rebuilds every broken history; answers the merchants rebuilt. */
  async repairAll(): Promise<string[]> {
    const broken: Array<{ merchant_id: string }> = await this.dataSource.query(BROKEN_HISTORIES, [null]);
    const repaired: string[] = [];
    for (const { merchant_id } of broken) {
      if (await this.repair(merchant_id)) repaired.push(merchant_id);
    }
    return repaired;
  }

  /** Rebuilds the merchant's history when it is broken; true when it was. */
  async repair(merchantId: string): Promise<boolean> {
    for (;;) {
      // Read before the transaction: on PGlite a second connection waits for the one holding a transaction.
      const events = await this.store.readStream(merchantStreamId(merchantId));
      const read = events.at(-1)?.revision ?? -1;
      const outcome = await this.dataSource.transaction(async (em) => {
        const rows: Array<{ revision: number }> = await em.query(
          'SELECT revision FROM merchant_settings WHERE merchant_id = $1 FOR UPDATE',
          [merchantId],
        );
        const revision = rows[0]?.revision;
        if (revision === undefined) return 'kept';
        // The projection applied events appended after the read: read again.
        if (revision > read) return 'behind';
        const broken: unknown[] = await em.query(BROKEN_HISTORIES, [merchantId]);
        if (broken.length === 0) return 'kept';
        await em.query('DELETE FROM merchant_settlement_addresses WHERE merchant_id = $1', [merchantId]);
        for (const event of events)
          if (event.revision <= revision && event.type === 'SettlementAddressChanged.v1')
            await recordSettlementAddressChange(
              em,
              merchantId,
              event.data as SettlementAddressChanged['data'],
            );
        return 'rebuilt';
      });
      if (outcome !== 'behind') return outcome === 'rebuilt';
    }
  }
}
