import { Inject, Injectable } from '@nestjs/common';
import type { ObservedTransfer } from '@stablepay/payments-domain';
import { PaymentFacts } from '../payment-facts';

/** An ERC-20 transfer into a payment's deposit address, as the indexer observed it (classified once, here). */
@Injectable()
export class ObserveDepositTransferHandler {
  constructor(@Inject(PaymentFacts) private readonly facts: PaymentFacts) {}

  handle(paymentId: string, transfer: ObservedTransfer, blockTime: Date, observationId: string) {
    return this.facts.append(
      paymentId,
      { type: 'ObserveTransfer', transfer, blockTime },
      `observe:${observationId}`,
    );
  }
}
