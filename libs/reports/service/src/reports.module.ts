import type { DynamicModule } from '@nestjs/common';
import { ReportsApiModule } from '@stablepay/reports-api';
import { SubscriptionCheckoutsCoreModule } from '@stablepay/subscriptions-service';
import { ReportsGateway } from './reports.gateway';

/** GET /reports/*: the reports' HTTP surface with its read side, composed by GatewayModule. */
export function reportsHttpModule(options: { exportsPerMerchant?: number } = {}): DynamicModule {
  return ReportsApiModule.forRoot({
    // ChainTime (the subscriptions' window fields at the chain's time).
    imports: [SubscriptionCheckoutsCoreModule],
    useCases: ReportsGateway,
    ...options,
  });
}
