import 'reflect-metadata';
import { chargeLedgerConfigFromEnv, chargeLedgerService } from '@stablepay/charge-ledger-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('charge-ledger', () =>
  startService(
    platformConfigFromEnv(process.env),
    [chargeLedgerService(chargeLedgerConfigFromEnv(process.env))],
    { service: 'charge-ledger' },
  ),
);
