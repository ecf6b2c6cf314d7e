import 'reflect-metadata';
import { settlementService } from '@stablepay/settlement-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('settlement', () =>
  startService(platformConfigFromEnv(process.env), [settlementService()], { service: 'settlement' }),
);
