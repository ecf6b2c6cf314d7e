import { Inject, Injectable } from '@nestjs/common';
import type { DeployHoldReason } from '@stablepay/payments-domain';
import { PaymentFacts } from '../payment-facts';

/**
 * The deposit flow held a requested deploy (the registry disagrees with the merchant's settings): recorded on the
 * payment so the merchant sees it (`deploy_hold_reason`), once per chain and reason.
 */
@Injectable()
export class RecordDeployHoldHandler {
  constructor(@Inject(PaymentFacts) private readonly facts: PaymentFacts) {}

  handle(paymentId: string, chain: string, reason: DeployHoldReason) {
    return this.facts.append(
      paymentId,
      { type: 'RecordDeployHeld', chain, reason },
      `deploy-held:${chain}:${reason}`,
    );
  }
}
