import { forwardRef, Module } from '@nestjs/common';
import { CLOCK } from '@stablepay/aggregate';
import type { RateSource } from '@stablepay/subscriptions-domain';
import type { Clock } from '@stablepay/util';
import { QuoteChargeHandler } from '../commands/quote-charge/quote-charge.handler';
import { RATE_SOURCE } from '../rates/rate-source.token';
import { SubscriptionCheckoutsCoreModule, SubscriptionsServiceModule } from '../subscriptions.module';
import { ChargeSubscriptionHandler } from '../commands/charge-subscription/charge-subscription.handler';
import { ChargeQuotes } from './charge-quotes';
import { SandboxSettlementProvider, SETTLEMENT_PROVIDER } from './settlement-provider';

/**
 * The charge side of the subscriptions service: charge quotes (reference quotes and settlement price locks) and the
 * merchant-signed charge. Part of subscriptionsService(); the command side lives only there.
 */
@Module({
  imports: [forwardRef(() => SubscriptionCheckoutsCoreModule), forwardRef(() => SubscriptionsServiceModule)],
  controllers: [QuoteChargeHandler, ChargeSubscriptionHandler],
  providers: [
    ChargeQuotes,
    {
      provide: SETTLEMENT_PROVIDER,
      useFactory: (rates: RateSource, clock: Clock) => new SandboxSettlementProvider(rates, clock),
      inject: [RATE_SOURCE, CLOCK],
    },
  ],
  exports: [ChargeQuotes, SETTLEMENT_PROVIDER],
})
export class SubscriptionChargesModule {}
