import 'reflect-metadata';
import { chainOperatorConfigFromEnv, sanctionsScreeningFromEnv } from '@stablepay/chain-operator';
import { merchantChainRegistrationService } from '@stablepay/merchants-service';
import { paymentDepositsService, paymentsConfigFromEnv, paymentsService } from '@stablepay/payments-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('payments', () => {
  // The payments process holds the operator key: it also registers merchants on chain.
  const chains = chainOperatorConfigFromEnv(process.env);
  return startService(
    platformConfigFromEnv(process.env),
    [
      // Checkouts accept what the chain layer holds (its test-mode tokens) and derive deposit addresses from its
      // PaymentFactory (PAYMENT_FACTORY_ADDRESS may only restate it).
      paymentsService(
        paymentsConfigFromEnv(process.env, {
          ...(chains.enabled && chains.mode === 'test' ? { testRegistry: chains.registry } : {}),
          defaultPaymentFactory: chains.addresses?.paymentFactory ?? null,
        }),
        // The payment actions (capture, refund, rescue, recover) submit through the chain layer's relayers.
        chains,
      ),
      merchantChainRegistrationService(chains),
      // Deposits on chain: watch, observe, confirm, screen (SANCTIONS_SCREENING_PROVIDER), deploy (docs/payment-deposits.md).
      paymentDepositsService(chains, { screening: sanctionsScreeningFromEnv(process.env) }),
    ],
    { service: 'payments' },
  );
});
