import 'reflect-metadata';
import { indexerService } from '@stablepay/indexer-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('indexer', () => startService(platformConfigFromEnv(process.env), [indexerService()], { service: 'indexer' }));
