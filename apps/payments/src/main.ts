import 'reflect-metadata';
import { chainOperatorConfigFromEnv } from '@stablepay/chain-operator';
import { merchantChainRegistrationService } from '@stablepay/merchants-service';
import { paymentsService } from '@stablepay/payments-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('payments', () => {
  // The payments process holds the operator key: it also registers merchants on chain.
  const chains = chainOperatorConfigFromEnv(process.env);
  return startService(
    platformConfigFromEnv(process.env),
    [paymentsService(), merchantChainRegistrationService(chains)],
    { service: 'payments' },
  );
});
