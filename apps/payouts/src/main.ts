import 'reflect-metadata';
import { payoutsService } from '@stablepay/payouts-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('payouts', () =>
  startService(platformConfigFromEnv(process.env), [payoutsService()], { service: 'payouts' }),
);
