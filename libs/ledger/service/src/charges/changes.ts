import { Injectable } from '@nestjs/common';
import { ReadModelChanges } from '@stablepay/node-util';
import type { SubscriptionChargeObject } from '@stablepay/ledger-domain';
import type { ChargeLedgerRow } from './charge-ledger.reader';

/**
 * In-process wake-ups for read-your-writes on the ledger: the projection announces each row it committed (key: the
 * `subc_` id), so a reader waiting for its row gets it without reading it (in another process it polls).
 */
@Injectable()
export class ChargeLedgerChanges extends ReadModelChanges<ChargeLedgerRow> {}

/** A charge as the Charge aggregate recorded it: the object of its stream folded through `revision`. */
export interface RecordedCharge {
  readonly id: string;
  readonly revision: number;
  readonly object: SubscriptionChargeObject;
}

/**
 * In-process wake-ups for the charge answer: the ledger consumer announces each charge stream it opened, with the
 * object the projection writes for that revision, once the append committed (key: the `subc_` id). `projecting`:
 * the consumer runs in this process (elsewhere the answer polls the charge stream).
 */
@Injectable()
export class ChargeRecords extends ReadModelChanges<RecordedCharge> {}
