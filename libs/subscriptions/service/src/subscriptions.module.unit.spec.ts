import type { ChainOperatorConfig } from '@stablepay/chain-operator';
import { ConfigError } from '@stablepay/util';
import { subscriptionsConfigFromEnv } from './subscriptions.config';
import { withChainAddresses } from './subscriptions.module';

const REGISTRY = '0x1111111111111111111111111111111111111111';
const FACTORY = '0x2222222222222222222222222222222222222222';
const OTHER = '0x3333333333333333333333333333333333333333';

const chainOperator = {
  enabled: true,
  operator: null,
  addresses: { registry: REGISTRY, subscriptionManagerFactory: FACTORY },
} as unknown as ChainOperatorConfig;

describe('subscriptions: the registry and manager factory are the ones the roles fix', () => {
  it('uses the computed addresses when the environment names none', () => {
    const config = withChainAddresses(subscriptionsConfigFromEnv({}), chainOperator);
    expect(config).toMatchObject({ registry: REGISTRY, subscriptionManagerFactory: FACTORY });
  });

  it('accepts a REGISTRY_ADDRESS / SUBSCRIPTION_MANAGER_FACTORY_ADDRESS that repeats them (any case)', () => {
    const env = {
      REGISTRY_ADDRESS: REGISTRY,
      SUBSCRIPTION_MANAGER_FACTORY_ADDRESS: FACTORY.toUpperCase().replace('0X', '0x'),
    };
    const config = withChainAddresses(subscriptionsConfigFromEnv(env), chainOperator);
    expect(config).toMatchObject({ registry: REGISTRY, subscriptionManagerFactory: FACTORY });
  });

  it('refuses to start on a REGISTRY_ADDRESS the merchant-change check and settings would not use', () => {
    const start = () =>
      withChainAddresses(subscriptionsConfigFromEnv({ REGISTRY_ADDRESS: OTHER }), chainOperator);
    expect(start).toThrow(ConfigError);
    expect(start).toThrow(
      /REGISTRY_ADDRESS \(0x3333333333333333333333333333333333333333\) is not the address/,
    );
  });

  it('refuses to start on another SUBSCRIPTION_MANAGER_FACTORY_ADDRESS', () => {
    const start = () =>
      withChainAddresses(
        subscriptionsConfigFromEnv({ SUBSCRIPTION_MANAGER_FACTORY_ADDRESS: OTHER }),
        chainOperator,
      );
    expect(start).toThrow(/SUBSCRIPTION_MANAGER_FACTORY_ADDRESS/);
  });

  it('keeps the environment when no chain layer is configured', () => {
    const config = withChainAddresses(subscriptionsConfigFromEnv({ REGISTRY_ADDRESS: OTHER }), undefined);
    expect(config.registry).toBe(OTHER);
  });
});
