import { Inject, Injectable } from '@nestjs/common';
import { PaymentFacts } from '../payment-facts';
import type { ScreeningResult } from '@stablepay/evm';

/** The sanctions screening of a payment's senders: clear, a match (flagged for good), or provider unreachable. */
@Injectable()
export class RecordScreeningHandler {
  constructor(@Inject(PaymentFacts) private readonly facts: PaymentFacts) {}

  handle(paymentId: string, addresses: readonly string[], result: ScreeningResult, attemptKey: string) {
    const outcome =
      result.kind === 'match'
        ? { kind: 'match' as const, address: result.address }
        : { kind: result.kind, addresses };
    return this.facts.append(paymentId, { type: 'RecordScreening', result: outcome }, `screen:${attemptKey}`);
  }
}
