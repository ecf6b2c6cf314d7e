import { Inject, Injectable } from '@nestjs/common';
import { PaymentFacts } from '../payment-facts';

/** A deposit transfer reached its chain's required confirmations. */
@Injectable()
export class ConfirmDepositTransferHandler {
  constructor(@Inject(PaymentFacts) private readonly facts: PaymentFacts) {}

  handle(
    paymentId: string,
    transfer: { chain: string; txHash: string; logIndex: number },
    observationId: string,
  ) {
    return this.facts.append(paymentId, { type: 'ConfirmTransfer', ...transfer }, `confirm:${observationId}`);
  }
}
