import 'reflect-metadata';
import { subscriptionsService } from '@stablepay/subscriptions-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('subscriptions', () =>
  startService(platformConfigFromEnv(process.env), [subscriptionsService()], { service: 'subscriptions' }),
);
