import 'reflect-metadata';
import { chainOperatorConfigFromEnv, sanctionsScreeningFromEnv } from '@stablepay/chain-operator';
import { payoutsConfigFromEnv, payoutsService } from '@stablepay/payouts-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('payouts', () => {
  // With PAYOUT_OFF_RAMP_ADDRESS the chain layer gives customers their CREATE2 deposit addresses, and deposits to them
  // are detected through the indexer (docs/payouts.md).
  const chains = chainOperatorConfigFromEnv(process.env);
  return startService(
    platformConfigFromEnv(process.env),
    [
      payoutsService(
        payoutsConfigFromEnv(process.env, {
          ...(chains.enabled && chains.mode === 'test' ? { testRegistry: chains.registry } : {}),
        }),
        { chains, screening: sanctionsScreeningFromEnv(process.env) },
      ),
    ],
    { service: 'payouts' },
  );
});
