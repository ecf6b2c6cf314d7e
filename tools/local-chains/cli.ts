/**
 * Local chains, standalone: one anvil per chain id, with the deterministic deployment proxy, the Stablepay registry,
 * both factories and the test stablecoins at identical addresses on each. Prints the addresses as JSON on stdout and
 * runs until SIGINT/SIGTERM; the nodes die with this process.
 *
 *   node -r @swc-node/register tools/local-chains/cli.ts [--chain-ids 8453,137] [--ports 8545,8546]
 */
import { startLocalChains, type StartLocalChainsOptions } from '@stablepay/local-chains';

function parseList(flag: string, value: string | undefined): number[] {
  if (!value) throw new Error(`${flag} needs a comma-separated list of integers`);
  const out = value.split(',').map((s) => Number(s.trim()));
  if (out.some((n) => !Number.isSafeInteger(n) || n <= 0))
    throw new Error(`${flag}: not a list of positive integers: ${value}`);
  return out;
}

function parseArgs(argv: readonly string[]): StartLocalChainsOptions {
  let chainIds: number[] | undefined;
  let ports: number[] | undefined;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--chain-ids') chainIds = parseList(arg, argv[++i]);
    else if (arg === '--ports') ports = parseList(arg, argv[++i]);
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write('usage: cli.ts [--chain-ids 8453,137] [--ports 8545,8546]\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${String(arg)}`);
  }
  return { ...(chainIds ? { chainIds } : {}), ...(ports ? { ports } : {}) };
}

async function main(): Promise<void> {
  const local = await startLocalChains(parseArgs(process.argv.slice(2)));
  const shutdown = (): void => {
    local.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
  const out = {
    chains: local.chains.map((c) => ({
      chainId: c.chainId,
      caip2: c.caip2,
      rpcUrl: c.rpcUrl,
      addresses: c.addresses,
    })),
    operator: local.operator,
    admin: local.admin,
    operatorPauser: local.operatorPauser,
    note: 'anvil dev keys: public, for local chains only',
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  process.stderr.write(
    `local chains ready (${local.chains.map((c) => c.caip2).join(', ')}); Ctrl+C to stop\n`,
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
