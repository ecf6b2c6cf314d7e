import { type DynamicModule, Module } from '@nestjs/common';
import { ChainOperatorModule, type ChainOperatorConfig } from '@stablepay/chain-operator';
import type { ServiceDefinition } from '@stablepay/runtime';
import { ConfirmDepositTransferHandler } from '../commands/confirm-deposit-transfer/confirm-deposit-transfer.handler';
import { ObserveDepositTransferHandler } from '../commands/observe-deposit-transfer/observe-deposit-transfer.handler';
import { PaymentFacts } from '../commands/payment-facts';
import { RecordDepositDeploymentHandler } from '../commands/record-deposit-deployment/record-deposit-deployment.handler';
import { RecordDepositOutflowHandler } from '../commands/record-deposit-outflow/record-deposit-outflow.handler';
import { RecordDeployHoldHandler } from '../commands/record-deploy-hold/record-deploy-hold.handler';
import { RecordScreeningHandler } from '../commands/record-screening/record-screening.handler';
import { RescanDepositHandler } from '../commands/rescan-deposit/rescan-deposit.handler';
import { RetractDepositTransferHandler } from '../commands/retract-deposit-transfer/retract-deposit-transfer.handler';
import { PaymentMerchantProfiles } from '../payments/merchant-profiles';
import { DEFAULT_DEPLOY_LOST_GRACE_S, DEPLOY_LOST_GRACE_S, DepositFlow } from './deposit-flow';
import {
  AddDepositObservationBlockHashes1795622400000,
  CreatePaymentDepositOutflows1767700000200,
  CreatePaymentDepositReceipts1795622400700,
  AllowLostDepositReceipts1795622400800,
  ValidateLostDepositReceipts1795622400900,
  AddDepositReceiptChecks1795622401000,
  AddDepositReceiptRecordedBlock1796054400300,
  AddDepositQueueChecks1796140800900,
  CreatePaymentDepositTables1767500000000,
  ReopenUnrecordedDepositConfirmations1767500000100,
} from './deposit.store';
import { SANCTIONS_SCREENING, SandboxSanctionsScreening, type SanctionsScreening } from '@stablepay/evm';

export interface PaymentDepositsOptions {
  /** The sanctions provider; default the sandbox adapter (magic payer addresses, docs/payment-deposits.md). */
  readonly screening?: SanctionsScreening;
  /**
   * How long a recorded deploy must stay on no chain (no receipt, not in the node's pool), across passes, before it
   * is declared lost and deployed again; default DEFAULT_DEPLOY_LOST_GRACE_S (5 min). Shorter, a deploy still in
   * another node's pool is undone, then mined: recorded again, but the redeploy's gas is spent.
   */
  readonly deployLostGraceSeconds?: number;
}

@Module({})
export class PaymentDepositsModule {
  static forRoot(config: ChainOperatorConfig, options: PaymentDepositsOptions = {}): DynamicModule {
    return {
      module: PaymentDepositsModule,
      imports: [ChainOperatorModule.forRoot(config)],
      controllers: [RescanDepositHandler],
      providers: [
        { provide: SANCTIONS_SCREENING, useValue: options.screening ?? new SandboxSanctionsScreening() },
        {
          provide: DEPLOY_LOST_GRACE_S,
          useValue: options.deployLostGraceSeconds ?? DEFAULT_DEPLOY_LOST_GRACE_S,
        },
        PaymentFacts,
        ObserveDepositTransferHandler,
        ConfirmDepositTransferHandler,
        RetractDepositTransferHandler,
        RecordScreeningHandler,
        RecordDepositDeploymentHandler,
        RecordDepositOutflowHandler,
        RecordDeployHoldHandler,
        PaymentMerchantProfiles,
        DepositFlow,
      ],
      exports: [DepositFlow, PaymentFacts],
    };
  }
}

/** The deposit side of the payments service (hosted with it: it needs the operator key). */
export function paymentDepositsService(
  config: ChainOperatorConfig,
  options: PaymentDepositsOptions = {},
): ServiceDefinition {
  return {
    name: 'payment-deposits',
    imports: [PaymentDepositsModule.forRoot(config, options)],
    // The operator's deposit re-scan (RescanDepositHandler).
    handlesCommands: true,
    migrations: [
      CreatePaymentDepositTables1767500000000,
      ReopenUnrecordedDepositConfirmations1767500000100,
      CreatePaymentDepositOutflows1767700000200,
      AddDepositObservationBlockHashes1795622400000,
      CreatePaymentDepositReceipts1795622400700,
      AllowLostDepositReceipts1795622400800,
      ValidateLostDepositReceipts1795622400900,
      AddDepositReceiptChecks1795622401000,
      AddDepositReceiptRecordedBlock1796054400300,
      AddDepositQueueChecks1796140800900,
    ],
  };
}
