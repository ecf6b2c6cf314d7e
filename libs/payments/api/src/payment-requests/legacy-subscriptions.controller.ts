import { All, Controller } from '@nestjs/common';
import { IgnoreQueryParameters, Public, subscriptionsUseSubscriptionCheckouts } from '@stablepay/http';
import { PAYMENT_REQUEST_PREFIX } from './payment-requests.controller';

/**
 * The older `{payments_base_url}` listing shows `POST /subscriptions`, `GET /subscriptions[/:id]` and
 * `POST /subscriptions/:id/cancel`; they conflict with the current model, where a subscription is created only by
 * a customer through a subscription checkout. Under the payment-request prefix (where a client of that listing
 * would call them) every such call is answered with 410 `subscriptions_use_subscription_checkouts`, naming the
 * routes to use instead. Public: it reveals nothing and a client must learn the way whatever key it sends; and
 * whatever query it sends (a `?limit=` of the old list is answered with the way, not as an unknown parameter).
 */
@Public()
@IgnoreQueryParameters()
@Controller(`${PAYMENT_REQUEST_PREFIX}/subscriptions`)
export class LegacySubscriptionsController {
  @All()
  root(): never {
    throw subscriptionsUseSubscriptionCheckouts();
  }

  @All(':id')
  one(): never {
    throw subscriptionsUseSubscriptionCheckouts();
  }

  @All(':id/cancel')
  cancel(): never {
    throw subscriptionsUseSubscriptionCheckouts();
  }
}
