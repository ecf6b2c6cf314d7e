import { type DynamicModule, Global, Inject, Module, Optional } from '@nestjs/common';
import { PayoutsApiModule } from '@stablepay/payouts-api';
import { BENEFICIARY_UPCASTERS } from '@stablepay/payouts-domain';
import type { SecretBox } from '@stablepay/util';
import {
  DEFAULT_CHAIN_LOG_RANGE,
  SANCTIONS_SCREENING,
  type SanctionsScreening,
  SandboxSanctionsScreening,
} from '@stablepay/evm';
import type { ServiceDefinition } from '@stablepay/runtime';
import {
  type ChainOperatorConfig,
  ChainOperatorModule,
  IndexerWatchClient,
  OperatorRelayers,
} from '@stablepay/chain-operator';
import { PayoutChainDeposits, PAYOUTS_CHAINS } from './flow/chain-deposits';
import { PayoutsAggregates } from './aggregates';
import { BankAccountVault, PAYOUTS_SEALING } from './bank-accounts';
import { CreateBeneficiaryHandler } from './commands/create-beneficiary/create-beneficiary.handler';
import { CreateCustomerHandler } from './commands/create-customer/create-customer.handler';
import { CreatePayoutHandler } from './commands/create-payout/create-payout.handler';
import { IssueKycLinkHandler } from './commands/issue-kyc-link/issue-kyc-link.handler';
import { SimulateDepositHandler } from './commands/simulate-deposit/simulate-deposit.handler';
import { SubmitKycHandler } from './commands/submit-kyc/submit-kyc.handler';
import { HELD_REFUNDS, HeldRefunds } from './commands/refund-held/held-refunds';
import { RefundHeldHandler } from './commands/refund-held/refund-held.handler';
import { RescanCustomerDepositsHandler } from './commands/rescan-customer-deposits/rescan-customer-deposits.handler';
import { RecordWithheldRefundReturnHandler } from './commands/withheld-refund-return/withheld-refund-return.handler';
import { DepositIntake } from './flow/deposit-intake';
import { PayoutFlowConsumer } from './flow/payout-flow.consumer';
import { PAYOUT_SWEEPER, PayoutSweeper } from './flow/payout-sweep';
import { PAYOUTS_MIGRATIONS } from './migrations';
import {
  type PayoutChains,
  PAYOUTS_CONFIG,
  type PayoutsConfig,
  payoutsConfigFromEnv,
  payoutsSealingFromEnv,
} from './payouts.config';
import { PayoutsGateway } from './payouts.gateway';
import { CUSTOMER_DEPOSIT_ADDRESS, customerDepositAddressFor } from './providers/customer-deposit-address';
import { KYC_PROVIDER, type KycProvider, SandboxKyc } from './providers/kyc-provider';
import { PAYOUTS_LIVE_PROVIDERS } from './providers/live-payouts';
import { OFF_RAMP_PROVIDER, type OffRampProvider, SandboxOffRamp } from './providers/off-ramp';
import { PayoutsProjection } from './read-model/payouts.projection';
import { PayoutsChanges, PayoutsReader } from './read-model/payouts.reader';

const PAYOUTS_CONFIG_OVERRIDE = Symbol('PAYOUTS_CONFIG_OVERRIDE');
const PAYOUTS_PORTS_OVERRIDE = Symbol('PAYOUTS_PORTS_OVERRIDE');

/** The adapters behind the payouts ports; absent ones are the sandboxes (docs/payouts.md). */
export interface PayoutsPorts {
  readonly kyc?: KycProvider;
  readonly offRamp?: OffRampProvider;
  /** The sanctions screening of depositing wallets (`sanctionsScreeningFromEnv(env)`, shared with payments). */
  readonly screening?: SanctionsScreening;
  /**
   * The chain layer (`chainOperatorConfigFromEnv`): with its `payouts` (PAYOUT_OFF_RAMP_ADDRESS) customers get their
   * CREATE2 deposit address, deposits are detected through the indexer and swept to the off-ramp with the operator
   * key (a ChainOperatorConfig with `operator`: required then); without it the chain-less sandbox.
   */
  readonly chains?: PayoutChains;
  /**
   * The sealing key of beneficiaries' bank accounts (`payoutsSealingFromEnv`: WEBHOOK_SECRET_ENCRYPTION_KEY, the
   * deployment's sealing key; the embedded run passes the merchants scope's box, its data directory's key).
   */
  readonly sealing?: SecretBox;
}

/** Makes the process's payouts configuration and adapters visible to every module (set by payoutsService()). */
@Global()
@Module({})
export class PayoutsConfigModule {
  static forRoot(config: PayoutsConfig, ports: PayoutsPorts): DynamicModule {
    return {
      module: PayoutsConfigModule,
      providers: [
        { provide: PAYOUTS_CONFIG_OVERRIDE, useValue: config },
        { provide: PAYOUTS_PORTS_OVERRIDE, useValue: ports },
      ],
      exports: [PAYOUTS_CONFIG_OVERRIDE, PAYOUTS_PORTS_OVERRIDE],
    };
  }
}

class Overrides {
  constructor(
    @Optional() @Inject(PAYOUTS_CONFIG_OVERRIDE) readonly config?: PayoutsConfig,
    @Optional() @Inject(PAYOUTS_PORTS_OVERRIDE) readonly ports?: PayoutsPorts,
  ) {}
}

/**
 * The payouts read side wherever it runs: the gateway (reads, the hosted KYC page) and the payouts service (its
 * commands and flow build on it). Static, so one process hosting both shares one instance.
 */
@Module({
  providers: [
    Overrides,
    {
      provide: PAYOUTS_CONFIG,
      useFactory: (o: Overrides) => o.config ?? payoutsConfigFromEnv(process.env),
      inject: [Overrides],
    },
    PayoutsChanges,
    PayoutsReader,
  ],
  exports: [PAYOUTS_CONFIG, PayoutsChanges, PayoutsReader, Overrides],
})
export class PayoutsCoreModule {}

/**
 * The payouts service (beta): owner of the Customer, Beneficiary and Payout aggregates (`customer-<id>`,
 * `beneficiary-<id>`, `payout-<id>`; one handler per use case under src/commands/), their projection, the payout
 * flow (process manager over the KYC, off-ramp and screening ports) and the deposit intake.
 */
@Module({
  imports: [PayoutsCoreModule],
  controllers: [
    CreateCustomerHandler,
    SubmitKycHandler,
    IssueKycLinkHandler,
    CreateBeneficiaryHandler,
    CreatePayoutHandler,
    SimulateDepositHandler,
    RefundHeldHandler,
    RescanCustomerDepositsHandler,
    RecordWithheldRefundReturnHandler,
  ],
  providers: [
    PayoutsAggregates,
    PayoutsProjection,
    DepositIntake,
    BankAccountVault,
    {
      provide: PAYOUTS_SEALING,
      useFactory: (o: Overrides) => o.ports?.sealing ?? payoutsSealingFromEnv(process.env),
      inject: [Overrides],
    },
    PayoutFlowConsumer,
    PayoutChainDeposits,
    IndexerWatchClient,
    { provide: PAYOUTS_CHAINS, useFactory: (o: Overrides) => o.ports?.chains, inject: [Overrides] },
    {
      provide: PAYOUT_SWEEPER,
      useFactory: (o: Overrides, relayers?: OperatorRelayers) => {
        const chains = o.ports?.chains;
        if (!chains?.enabled || !chains.payouts) return null;
        // Deposit addresses that only the operator's sweep can empty are never handed out by a process that
        // cannot sweep them (payoutChainsFromEnv refuses that configuration first).
        if (!relayers?.set)
          throw new Error('payouts on chain need the operator key to sweep deposits (OPERATOR_PRIVATE_KEY)');
        return new PayoutSweeper(
          relayers.set,
          chains.payouts,
          (chain) => chains.chains.find((c) => c.caip2 === chain)?.logRange ?? DEFAULT_CHAIN_LOG_RANGE,
          chains.chains.map((c) => c.caip2),
        );
      },
      inject: [Overrides, { token: OperatorRelayers, optional: true }],
    },
    {
      provide: HELD_REFUNDS,
      // The sweeper's configuration: where it can sweep, a held payout's deposit can be returned from.
      useFactory: (o: Overrides, relayers?: OperatorRelayers) => {
        const chains = o.ports?.chains;
        if (!chains?.enabled || !chains.payouts || !relayers?.set) return null;
        return new HeldRefunds(
          relayers.set,
          chains.payouts,
          (chain) => chains.chains.find((c) => c.caip2 === chain)?.logRange ?? DEFAULT_CHAIN_LOG_RANGE,
        );
      },
      inject: [Overrides, { token: OperatorRelayers, optional: true }],
    },
    {
      provide: CUSTOMER_DEPOSIT_ADDRESS,
      useFactory: (o: Overrides) => customerDepositAddressFor(o.ports?.chains),
      inject: [Overrides],
    },
    {
      provide: PAYOUTS_LIVE_PROVIDERS,
      useFactory: (o: Overrides) => Boolean(o.ports?.kyc && o.ports?.offRamp),
      inject: [Overrides],
    },
    {
      provide: KYC_PROVIDER,
      useFactory: (o: Overrides) => o.ports?.kyc ?? new SandboxKyc(),
      inject: [Overrides],
    },
    {
      provide: OFF_RAMP_PROVIDER,
      useFactory: (o: Overrides) => o.ports?.offRamp ?? new SandboxOffRamp(),
      inject: [Overrides],
    },
    {
      provide: SANCTIONS_SCREENING,
      useFactory: (o: Overrides) => o.ports?.screening ?? new SandboxSanctionsScreening(),
      inject: [Overrides],
    },
  ],
  exports: [PayoutsAggregates, PayoutsProjection, DepositIntake, PayoutFlowConsumer, PayoutChainDeposits],
})
export class PayoutsServiceModule {}

export function payoutsService(
  config: PayoutsConfig = payoutsConfigFromEnv(process.env),
  ports: PayoutsPorts = {},
): ServiceDefinition {
  const chains = ports.chains;
  // The operator key's relayers (the sweep): the process's one RelayerSet, shared with payments and subscriptions
  // when they run in the same process on the same config object (ChainOperatorModule.forRoot).
  const operator =
    chains && 'operator' in chains && (chains as ChainOperatorConfig).operator
      ? [ChainOperatorModule.forRoot(chains as ChainOperatorConfig)]
      : [];
  return {
    name: 'payouts',
    imports: [PayoutsConfigModule.forRoot(config, ports), ...operator, PayoutsServiceModule],
    migrations: PAYOUTS_MIGRATIONS,
    upcasters: BENEFICIARY_UPCASTERS,
    handlesCommands: true,
  };
}

/** The gateway's payouts routes (beta): reads in the gateway, commands sent to the payouts service. */
export function payoutsHttpModule(): DynamicModule {
  return PayoutsApiModule.forRoot({ imports: [PayoutsCoreModule], useCases: PayoutsGateway });
}
