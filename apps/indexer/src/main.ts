import 'reflect-metadata';
import { indexerConfigFromEnv, indexerService } from '@stablepay/indexer-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

// Both configurations are read inside runMain: a bad variable stops the process with its name (exit 78).
runMain('indexer', () =>
  startService(platformConfigFromEnv(process.env), [indexerService(indexerConfigFromEnv(process.env))], {
    service: 'indexer',
  }),
);
