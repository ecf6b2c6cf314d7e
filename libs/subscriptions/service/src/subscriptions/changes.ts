import { Injectable } from '@nestjs/common';
import { ReadModelChanges } from '@stablepay/node-util';
import type { SubscriptionRow } from './subscription.reader';

/**
 * In-process wake-ups for read-your-writes on `subscriptions` rows (key: the lower-case subscription id): the
 * projection announces each row it committed, so a waiter gets it without reading it (in another process it polls).
 */
@Injectable()
export class SubscriptionChanges extends ReadModelChanges<SubscriptionRow> {}
