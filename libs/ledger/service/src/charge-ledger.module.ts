import { type DynamicModule, Module } from '@nestjs/common';
import { LedgerApiModule } from '@stablepay/ledger-api';
import { CLOCK } from '@stablepay/aggregate';
import type { ServiceDefinition } from '@stablepay/runtime';
import type { Clock } from '@stablepay/util';
import {
  CHARGE_LEDGER_CONFIG,
  type ChargeLedgerConfig,
  chargeLedgerConfigFromEnv,
} from './charge-ledger.config';
import { ChargeLedgerGateway } from './charge-ledger.gateway';
import { ChargeLedgerChanges, ChargeRecords } from './charges/changes';
import { ChargeLedgerCommands } from './charges/charge-ledger.commands';
import { ChargeLedgerProjection } from './charges/charge-ledger.projection';
import { ChargeLedgerReader } from './charges/charge-ledger.reader';
import { SubscriptionChargesConsumer } from './consumers/subscription-charges.consumer';
import { LEDGER_MIGRATIONS } from './migrations';
import { SandboxPayouts } from './settlement/sandbox-payouts';
import { SettlementDeadlines } from './settlement/settlement-deadlines';
import { SandboxSettlementFeed, SETTLEMENT_FEED } from './settlement/settlement-feed';
import { SettlementFeedConsumer } from './settlement/settlement-feed.consumer';

/** The ledger's read side, wherever it is read: the gateway (lists) and the service (read-your-writes). */
@Module({
  providers: [ChargeLedgerChanges, ChargeRecords, ChargeLedgerReader],
  exports: [ChargeLedgerChanges, ChargeRecords, ChargeLedgerReader],
})
export class ChargeLedgerCoreModule {}

/**
 * The charge-ledger service: owner of the Charge aggregate (`charge-<subc_ id>`), the writer of the ledger from the
 * subscription charge facts (SubscriptionChargesConsumer) and its projection (subscription_charges, with the ledger
 * sequence). The command side lives only here.
 */
@Module({
  imports: [ChargeLedgerCoreModule],
  providers: [
    ChargeLedgerCommands,
    ChargeLedgerProjection,
    SubscriptionChargesConsumer,
    // The provider's feed: the sandbox until a real provider's adapter is configured.
    {
      provide: SETTLEMENT_FEED,
      useFactory: (clock: Clock) => new SandboxSettlementFeed(clock),
      inject: [CLOCK],
    },
    SettlementFeedConsumer,
    SettlementDeadlines,
    SandboxPayouts,
  ],
  exports: [
    ChargeLedgerCommands,
    ChargeLedgerProjection,
    SubscriptionChargesConsumer,
    SETTLEMENT_FEED,
    SettlementFeedConsumer,
    SettlementDeadlines,
    SandboxPayouts,
  ],
})
export class ChargeLedgerServiceModule {
  static forRoot(config: ChargeLedgerConfig): DynamicModule {
    return {
      module: ChargeLedgerServiceModule,
      providers: [{ provide: CHARGE_LEDGER_CONFIG, useValue: config }],
      exports: [CHARGE_LEDGER_CONFIG],
    };
  }
}

export function chargeLedgerService(
  config: ChargeLedgerConfig = chargeLedgerConfigFromEnv({}),
): ServiceDefinition {
  return {
    name: 'charge-ledger',
    imports: [ChargeLedgerServiceModule.forRoot(config)],
    migrations: LEDGER_MIGRATIONS,
  };
}

/** GET /merchants/:merchantId/charges in the gateway: reads the ledger read model in-process. */
export function chargeLedgerHttpModule(): DynamicModule {
  return LedgerApiModule.forRoot({ imports: [ChargeLedgerCoreModule], useCases: ChargeLedgerGateway });
}
