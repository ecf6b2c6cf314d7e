import 'reflect-metadata';
import { chargeLedgerService } from '@stablepay/charge-ledger-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('charge-ledger', () =>
  startService(platformConfigFromEnv(process.env), [chargeLedgerService()], { service: 'charge-ledger' }),
);
