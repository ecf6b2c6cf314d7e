import { Injectable } from '@nestjs/common';
import { ReadModelChanges } from '@stablepay/node-util';
import type { ChargeLedgerRow } from './charge-ledger.reader';

/**
 * In-process wake-ups for read-your-writes on the ledger: the projection announces each row it committed (key: the
 * `subc_` id), so a charge answer waiting for its row gets it without reading it (in another process it polls).
 */
@Injectable()
export class ChargeLedgerChanges extends ReadModelChanges<ChargeLedgerRow> {}
