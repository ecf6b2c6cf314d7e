import { Inject, Injectable } from '@nestjs/common';
import { deploymentKey, type PaymentMethod } from '@stablepay/payments-domain';
import { PaymentFacts } from '../payment-facts';

export interface DepositDeployment {
  readonly txHash: string;
  readonly chain: string;
  readonly method: PaymentMethod | 'NONE';
  /** The payer the chain attested (PayerAttested), the sender of the funding transfer. */
  readonly payer: string;
  readonly payerFinalAt: Date;
  readonly amount: string;
  readonly settlementAddress: string;
  readonly authorizationExpiry: Date | null;
}

/** The deposit contract is deployed: DIRECT forwarded (settled), TWO_STEP escrowed, NONE deployed only. */
@Injectable()
export class RecordDepositDeploymentHandler {
  constructor(@Inject(PaymentFacts) private readonly facts: PaymentFacts) {}

  async handle(paymentId: string, d: DepositDeployment) {
    const base = {
      type: 'RecordDeployed' as const,
      txHash: d.txHash,
      chain: d.chain,
      payer: d.payer,
      payerFinalAt: d.payerFinalAt,
    };
    const command =
      d.method === 'DIRECT'
        ? { ...base, method: 'DIRECT' as const, amount: d.amount, settlementAddress: d.settlementAddress }
        : d.method === 'TWO_STEP'
          ? {
              ...base,
              method: 'TWO_STEP' as const,
              amount: d.amount,
              authorizationExpiry: d.authorizationExpiry ?? new Date(0),
            }
          : { ...base, method: 'NONE' as const };
    // Keyed by the deploy and the deployments lost before it: a deploy declared lost then mined after all (DIRECT
    // forwarded the funds; the redeploy is refused, and finds this one) records again, and the payment settles.
    return this.facts.append(paymentId, command, await this.key(paymentId, 'deploy', d.txHash));
  }

  /**
   * The deployment recorded for a payment a reorg failed is on the chain (landed again on the new fork) in
   * `blockHash`, with the chain's confirmations: the domain reinstates the payment once the funding confirmed there
   * covers the order, else records nothing (asked again later). Keyed by the block: a later reorg's loss and
   * reinstatement of the same deploy is another finding.
   */
  found(paymentId: string, deployTxHash: string, blockHash: string) {
    return this.facts.append(
      paymentId,
      { type: 'RecordDeploymentFound', deployTxHash },
      `deploy-found:${deployTxHash}:${blockHash.toLowerCase()}`,
    );
  }

  /** The deployment recorded is not on the chain any more (a reorg that failed the payment took it). */
  async lost(paymentId: string, deployTxHash: string) {
    return this.facts.append(
      paymentId,
      { type: 'RecordDeploymentLost', deployTxHash },
      await this.key(paymentId, 'deploy-lost', deployTxHash),
    );
  }

  private async key(paymentId: string, prefix: string, txHash: string): Promise<string> {
    return deploymentKey((await this.facts.load(paymentId)).state, prefix, txHash);
  }
}
