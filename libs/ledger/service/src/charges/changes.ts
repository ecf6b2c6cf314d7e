import { Injectable } from '@nestjs/common';
import { EventEmitter } from 'node:events';

/**
 * In-process wake-ups for read-your-writes: the ledger projection emits `<subc_ id>` after a row changed; a reader
 * waiting for that charge wakes at once (in another process it polls).
 */
@Injectable()
export class ChargeLedgerChanges extends EventEmitter {
  constructor() {
    super();
    this.setMaxListeners(0);
  }
}
