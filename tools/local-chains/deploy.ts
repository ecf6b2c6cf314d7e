/**
 * Puts the Stablepay contracts on chains that are already running (docker-compose's anvil: its one-shot `contracts`
 * job; any local node): the same bootstrap the embedded run applies to the nodes it starts (bootstrapStablepay).
 * Idempotent: a second run finds every contract at its computed address and sends nothing. Exits 0 once each chain
 * holds them, prints the addresses as JSON; exit 78 names a bad variable.
 *
 *   CHAIN_RPC_URLS=eip155:8453=http://anvil:8545 REGISTRY_ADMIN_ADDRESS=0x... OPERATOR_PAUSER_ADDRESS=0x... \
 *   OPERATOR_PRIVATE_KEY=0x... DEPLOYER_PRIVATE_KEY=0x... [CHAIN_MODE=test] [FUND_OPERATOR_WEI=...] \
 *     node -r @swc-node/register tools/local-chains/deploy.ts
 *
 * The roles are read exactly as the services read them (chainOperatorConfigFromEnv), so the addresses deployed are
 * the ones the services compute. DEPLOYER_PRIVATE_KEY only pays for gas (on anvil: a dev key). CHAIN_MODE=test also
 * deploys the test stablecoins. FUND_OPERATOR_WEI (local nodes only, anvil_setBalance) gives the operator gas money.
 */
import { Wallet } from 'ethers';
import { chainOperatorConfigFromEnv } from '@stablepay/chain-operator';
import { bootstrapStablepay, localChainProvider } from '@stablepay/local-chains';
import { ConfigError, envOptional } from '@stablepay/util';

const READY_TIMEOUT_MS = 120_000;

async function waitForNode(provider: ReturnType<typeof localChainProvider>, caip2: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    try {
      await provider.getBlockNumber();
      return;
    } catch (error) {
      if (Date.now() > deadline)
        throw new Error(`${caip2} did not answer within ${READY_TIMEOUT_MS} ms: ${String(error)}`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}

async function main(): Promise<void> {
  const config = chainOperatorConfigFromEnv(process.env);
  if (!config.enabled || !config.roles || !config.operator)
    throw new ConfigError('environment variable CHAIN_RPC_URLS is required (the chains to deploy to)');
  const deployerKey = envOptional(process.env, 'DEPLOYER_PRIVATE_KEY');
  if (!deployerKey || !/^0x[0-9a-fA-F]{64}$/.test(deployerKey))
    throw new ConfigError(
      'environment variable DEPLOYER_PRIVATE_KEY must be 0x followed by 64 hex characters',
    );
  const fund = envOptional(process.env, 'FUND_OPERATOR_WEI');
  if (fund !== undefined && !/^[0-9]+$/.test(fund))
    throw new ConfigError('environment variable FUND_OPERATOR_WEI must be a whole number of wei');
  const roles = config.roles;
  const operator = config.operator.address;
  const deployed = [];
  for (const chain of config.chains) {
    const provider = localChainProvider(chain.rpcUrl, Number(chain.chainId));
    try {
      await waitForNode(provider, chain.caip2);
      const addresses = await bootstrapStablepay(new Wallet(deployerKey, provider), roles, {
        testStablecoins: config.mode === 'test',
      });
      if (fund !== undefined && (await provider.getBalance(operator)) < BigInt(fund)) {
        await provider.send('anvil_setBalance', [operator, `0x${BigInt(fund).toString(16)}`]);
      }
      deployed.push({ chain: chain.caip2, addresses });
    } finally {
      provider.destroy();
    }
  }
  process.stdout.write(`${JSON.stringify({ msg: 'stablepay contracts deployed', roles, deployed })}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(error instanceof ConfigError ? 78 : 1);
  },
);
