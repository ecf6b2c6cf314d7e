import { Injectable } from '@nestjs/common';
import { ReadModelChanges } from '@stablepay/node-util';
import type { SubscriptionCheckoutRow } from './subscription-checkout.reader';

/**
 * In-process wake-ups for read-your-writes on `subscription_checkouts` rows (key: the `schk_` id): the projection
 * announces each row it committed, so a command that waits for its revision gets the row without reading it. Where
 * the projection runs in another process nothing is emitted here and the reader polls instead.
 */
@Injectable()
export class SubscriptionCheckoutChanges extends ReadModelChanges<SubscriptionCheckoutRow> {}
