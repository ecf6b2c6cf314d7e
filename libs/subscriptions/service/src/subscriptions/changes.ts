import { Injectable } from '@nestjs/common';
import { EventEmitter } from 'node:events';

/** In-process wake-ups for read-your-writes on `subscriptions` rows (key: the lower-case subscription id). */
@Injectable()
export class SubscriptionChanges extends EventEmitter {
  constructor() {
    super();
    this.setMaxListeners(0);
  }
}
