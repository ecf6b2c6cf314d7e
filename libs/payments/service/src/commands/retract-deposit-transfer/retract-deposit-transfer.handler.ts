import { Inject, Injectable } from '@nestjs/common';
import { PaymentFacts } from '../payment-facts';

/**
 * The block of a deposit transfer left the canonical chain (ObservationRetracted): unconfirmed, it never happened;
 * a confirmed deposit lost this way fails the payment (`deposit_lost_to_reorg`).
 */
@Injectable()
export class RetractDepositTransferHandler {
  constructor(@Inject(PaymentFacts) private readonly facts: PaymentFacts) {}

  handle(
    paymentId: string,
    transfer: { chain: string; txHash: string; logIndex: number },
    retractionId: string,
  ) {
    return this.facts.append(paymentId, { type: 'RetractTransfer', ...transfer }, `retract:${retractionId}`);
  }
}
