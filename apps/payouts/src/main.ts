import 'reflect-metadata';
import { sanctionsScreeningFromEnv } from '@stablepay/chain-operator';
import {
  payoutChainsFromEnv,
  payoutsConfigFromEnv,
  payoutsSealingFromEnv,
  payoutsService,
} from '@stablepay/payouts-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('payouts', () => {
  // Keyless: with PAYOUT_OFF_RAMP_ADDRESS and PAYOUT_DEPOSIT_FACTORY_ADDRESS customers get their CREATE2 deposit
  // addresses and deposits to them are detected through the indexer (docs/payouts.md).
  const chains = payoutChainsFromEnv(process.env);
  return startService(
    platformConfigFromEnv(process.env),
    [
      payoutsService(
        payoutsConfigFromEnv(process.env, {
          ...(chains.enabled && chains.mode === 'test' ? { testRegistry: chains.registry } : {}),
        }),
        {
          chains,
          screening: sanctionsScreeningFromEnv(process.env),
          sealing: payoutsSealingFromEnv(process.env),
        },
      ),
    ],
    { service: 'payouts' },
  );
});
