import 'reflect-metadata';
import { chainOperatorConfigFromEnv, sanctionsScreeningFromEnv } from '@stablepay/chain-operator';
import { subscriptionsConfigFromEnv, subscriptionsService } from '@stablepay/subscriptions-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('subscriptions', () => {
  // The chain layer (docs/chain-operator.md): subscribe and merchant cancel deploy managers, register the merchant
  // where it is not yet and submit through its one RelayerSet for the operator key. Without CHAIN_RPC_URLS the
  // service still serves intents; subscribe and cancel answer 503 chain_unavailable.
  const chains = chainOperatorConfigFromEnv(process.env);
  return startService(
    platformConfigFromEnv(process.env),
    [
      // Subscriber wallets are screened by the provider SANCTIONS_SCREENING_PROVIDER names (as payments' deposits).
      subscriptionsService(subscriptionsConfigFromEnv(process.env), chains, {
        screening: sanctionsScreeningFromEnv(process.env),
      }),
    ],
    { service: 'subscriptions' },
  );
});
