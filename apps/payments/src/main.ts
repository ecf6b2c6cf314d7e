import 'reflect-metadata';
import { paymentsService } from '@stablepay/payments-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('payments', () =>
  startService(platformConfigFromEnv(process.env), [paymentsService()], { service: 'payments' }),
);
