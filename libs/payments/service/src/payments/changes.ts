import { Injectable } from '@nestjs/common';
import { EventEmitter } from 'node:events';

/**
 * In-process wake-ups for read-your-writes: the projection emits `<payment id>` after its rows changed, and a
 * command that waits for its revision wakes at once. Where the projection runs in another process, the reader
 * polls instead.
 */
@Injectable()
export class PaymentChanges extends EventEmitter {
  constructor() {
    super();
    this.setMaxListeners(0);
  }
}
