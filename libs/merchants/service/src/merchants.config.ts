import { chainModeFromEnv, publicRolesFromEnv } from '@stablepay/chain-operator';
import { computeStablepayAddresses, knownContracts, type StablepayAddresses } from '@stablepay/contracts';
import { ConfigError, envBool, envInt, envOptional, SecretBox } from '@stablepay/util';
import { randomBytes } from 'node:crypto';
import { HostResolver } from '@stablepay/node-util';
import { chainRpcUrlsFromEnv } from '@stablepay/evm';
import { getAddress } from 'ethers';

export interface MerchantsConfig {
  /** The operator's own pauser: a merchant pauser may never equal it (pauser_is_exodus_pauser). */
  readonly operatorPauser: string | null;
  /** ALLOW_LOCAL_WEBHOOKS=true admits loopback webhook URLs, http included (local development and tests). */
  readonly allowLocalWebhooks: boolean;
  /** Enables the operator API when set. */
  readonly adminToken: string | null;
  readonly secretBox: SecretBox;
  /** CAIP-2 chains a merchant signer is reported for in settings. */
  readonly supportedChains: readonly string[];
  /**
   * The PaymentFactory (the same on every chain): PAYMENT_FACTORY_ADDRESS, else computed from the public roles
   * (OPERATOR_ADDRESS, REGISTRY_ADMIN_ADDRESS, OPERATOR_PAUSER_ADDRESS) as the payments service computes it. Null
   * with neither.
   */
  readonly paymentFactoryAddress: string | null;
  /**
   * The StablepayRegistry (the same on every chain): the `verifyingContract` of MerchantChange and
   * RevokeAuthorizations, which settings show per chain with the merchant's current epoch there. Computed from the
   * public roles, as the payments service that verifies a MerchantChange computes it; REGISTRY_ADDRESS may only
   * restate it (or name it where no roles are given). Null with neither.
   */
  readonly registryAddress: string | null;
  /**
   * The SubscriptionManagerFactory (the same on every chain): computed from the public roles, else
   * SUBSCRIPTION_MANAGER_FACTORY_ADDRESS; null with neither. With the registry it fixes the address a merchant's
   * manager will have once deployed (the declared pauser is bound into it), which may not be the merchant's signer
   * or settlement address even before it exists: the chain would pay the settlement into it from its first block.
   */
  readonly subscriptionManagerFactoryAddress: string | null;
  /**
   * Contracts a merchant signer or settlement address may not be (lower-cased address -> what it is): the
   * stablecoins and the Stablepay contracts (`knownContracts`). A token contract keeps every payment sent to it and
   * no contract here can sign.
   */
  readonly knownContracts: ReadonlyMap<string, string>;
  /** RPC endpoint per supported CAIP-2 chain (CHAIN_RPC_URLS), for ERC-1271 checks of contract pausers. */
  readonly chainRpcUrls: Readonly<Record<string, string>>;
  /**
   * The chains' mode (CHAIN_MODE, read by chainModeFromEnv as every scope reads it): only merchants of this mode are registered on them (settings
   * show `chain_registrations` for those merchants only).
   */
  readonly chainMode: 'live' | 'test';
  /**
   * Resolves webhook URL names, at save (PATCH /settings) and at every delivery connection: c-ares, never the
   * libuv pool, each name given up after WEBHOOK_DNS_TIMEOUT_MS (docs/webhooks.md). Tests point it at their own
   * DNS server.
   */
  readonly webhookDns: HostResolver;
  /** The webhook event types a merchant may select (PATCH /settings `webhook_event_types`); the webhooks scope's catalogue. */
  readonly webhookEventCatalogue?: readonly string[];
}

export const MERCHANTS_CONFIG = Symbol('MERCHANTS_CONFIG');
/** ADMIN_TOKEN's shortest accepted length. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;
export const DEFAULT_SUPPORTED_CHAINS = [
  'eip155:1',
  'eip155:137',
  'eip155:42161',
  'eip155:8453',
  'eip155:10',
];

/** WEBHOOK_DNS_TIMEOUT_MS's default: half the 10-second response deadline, which the resolution is part of. */
export const DEFAULT_WEBHOOK_DNS_TIMEOUT_MS = 5_000;

/** Reads the merchants module's configuration; in embedded mode an ephemeral encryption key is allowed. */
export function merchantsConfigFromEnv(
  env: Record<string, string | undefined>,
  options: {
    allowEphemeralKey: boolean;
    /**
     * The gateway's: with chains (CHAIN_RPC_URLS) settings must name the contracts, so the public roles (or
     * REGISTRY_ADDRESS) are required; without them merchants would be shown no verifying contract.
     */
    requireContractAddresses?: boolean;
  },
): MerchantsConfig {
  const key = envOptional(env, 'WEBHOOK_SECRET_ENCRYPTION_KEY');
  if (!key && !options.allowEphemeralKey) {
    throw new Error(
      'environment variable WEBHOOK_SECRET_ENCRYPTION_KEY is required (32 bytes as 64 hex characters or base64)',
    );
  }
  const previous = (envOptional(env, 'WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS') ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '');
  if (!key && previous.length > 0)
    throw new Error(
      'environment variable WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS needs WEBHOOK_SECRET_ENCRYPTION_KEY (the key that replaced them)',
    );
  let secretBox: SecretBox;
  try {
    secretBox = key ? SecretBox.fromEncodedKey(key, previous) : new SecretBox(randomBytes(32));
  } catch {
    throw new Error(
      'environment variables WEBHOOK_SECRET_ENCRYPTION_KEY and WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS (comma-separated) must hold keys of 32 bytes as 64 hex characters or base64',
    );
  }
  const chains = envOptional(env, 'SUPPORTED_CHAINS');
  const adminToken = envOptional(env, 'ADMIN_TOKEN') ?? null;
  // The operator API creates merchants and their live keys: its token is a password nobody should guess, whatever
  // the mode (the check also keeps a test value from being copied into a deployment).
  if (adminToken !== null && adminToken.length < MIN_ADMIN_TOKEN_LENGTH) {
    throw new ConfigError(
      `environment variable ADMIN_TOKEN must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters (e.g. openssl rand -hex 32), or unset to turn the operator API off`,
    );
  }
  const rpcUrls = chainRpcUrlsFromEnv(env);
  const roles = publicRolesFromEnv(env);
  const computed = roles ? computeStablepayAddresses(roles) : null;
  const registryAddress = registryAddressFromEnv(env, computed);
  if (options.requireContractAddresses && rpcUrls.size > 0 && registryAddress === null) {
    throw new ConfigError(
      "environment variable OPERATOR_ADDRESS (the operator's public address, with REGISTRY_ADMIN_ADDRESS and OPERATOR_PAUSER_ADDRESS) is required when CHAIN_RPC_URLS is set: settings show the registry and payment factory those roles fix",
    );
  }
  const paymentFactoryAddress = paymentFactoryFromEnv(env, computed);
  const subscriptionManagerFactoryAddress = subscriptionManagerFactoryFromEnv(env, computed);
  return {
    operatorPauser: envOptional(env, 'OPERATOR_PAUSER_ADDRESS') ?? null,
    allowLocalWebhooks: envBool(env, 'ALLOW_LOCAL_WEBHOOKS', false),
    adminToken,
    secretBox,
    supportedChains: chains ? chains.split(',').map((c) => c.trim()) : DEFAULT_SUPPORTED_CHAINS,
    paymentFactoryAddress,
    registryAddress,
    subscriptionManagerFactoryAddress,
    knownContracts: knownContracts({
      ...computed,
      ...(registryAddress ? { registry: registryAddress } : {}),
      ...(paymentFactoryAddress ? { paymentFactory: paymentFactoryAddress } : {}),
    }),
    chainRpcUrls: Object.fromEntries(rpcUrls),
    chainMode: chainModeFromEnv(env),
    webhookDns: new HostResolver({
      timeoutMs: envInt(env, 'WEBHOOK_DNS_TIMEOUT_MS', DEFAULT_WEBHOOK_DNS_TIMEOUT_MS, 100, 9_000),
    }),
  };
}

/**
 * The registry the roles fix, else REGISTRY_ADDRESS. With both they must agree: the payments service verifies a
 * MerchantChange against the computed registry, so a merchant signing for another one shown here would be refused.
 */
function registryAddressFromEnv(
  env: Record<string, string | undefined>,
  computed: StablepayAddresses | null,
): string | null {
  const configured = addressFromEnv(env, 'REGISTRY_ADDRESS');
  if (computed && configured !== undefined && configured !== computed.registry) {
    throw new ConfigError(
      `environment variable REGISTRY_ADDRESS (${configured}) is not the registry OPERATOR_ADDRESS, REGISTRY_ADMIN_ADDRESS and OPERATOR_PAUSER_ADDRESS fix (${computed.registry}): unset it, or correct the roles`,
    );
  }
  return computed?.registry ?? configured ?? null;
}

/**
 * The PaymentFactory the roles fix, else PAYMENT_FACTORY_ADDRESS. With both they must agree: the payments service
 * deploys deposits only through the computed factory, so another one shown here would name no deposit's factory.
 */
function paymentFactoryFromEnv(
  env: Record<string, string | undefined>,
  computed: StablepayAddresses | null,
): string | null {
  const configured = addressFromEnv(env, 'PAYMENT_FACTORY_ADDRESS');
  if (computed && configured !== undefined && configured !== computed.paymentFactory) {
    throw new ConfigError(
      `environment variable PAYMENT_FACTORY_ADDRESS (${configured}) is not the PaymentFactory OPERATOR_ADDRESS, REGISTRY_ADMIN_ADDRESS and OPERATOR_PAUSER_ADDRESS fix (${computed.paymentFactory}): unset it, or correct the roles`,
    );
  }
  return computed?.paymentFactory ?? configured ?? null;
}

/**
 * The SubscriptionManagerFactory the roles fix, else SUBSCRIPTION_MANAGER_FACTORY_ADDRESS (the subscriptions service
 * refuses a disagreeing pair at its start, withChainAddresses).
 */
function subscriptionManagerFactoryFromEnv(
  env: Record<string, string | undefined>,
  computed: StablepayAddresses | null,
): string | null {
  return (
    computed?.subscriptionManagerFactory ??
    addressFromEnv(env, 'SUBSCRIPTION_MANAGER_FACTORY_ADDRESS') ??
    null
  );
}

/** An address variable, checksummed (a merchant signs for or pays into it, so a typo must stop the start). */
function addressFromEnv(env: Record<string, string | undefined>, name: string): string | undefined {
  const raw = envOptional(env, name);
  if (raw === undefined) return undefined;
  try {
    return getAddress(raw);
  } catch {
    throw new ConfigError(`environment variable ${name} must be a 0x-prefixed 20-byte address, got '${raw}'`);
  }
}
