import 'reflect-metadata';
import { gatewayService } from '@stablepay/gateway-service';
import { idempotencyPruneConfigFromEnv } from '@stablepay/http';
import { merchantsConfigFromEnv } from '@stablepay/merchants-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('gateway', () =>
  startService(
    platformConfigFromEnv(process.env),
    [
      gatewayService(
        merchantsConfigFromEnv(process.env, { allowEphemeralKey: false, requireContractAddresses: true }),
        idempotencyPruneConfigFromEnv(process.env),
      ),
    ],
    {
      service: 'gateway',
    },
  ),
);
