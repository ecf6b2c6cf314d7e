import { startEmbedded } from './embedded';
import { ConfigError } from '@stablepay/util';

/** `npm start`: the embedded stack, with what a newcomer needs printed once it is up. */
async function main(): Promise<void> {
  const stack = await startEmbedded({ seedDemoMerchant: true });
  const keys = stack.demoKeys;
  const banner = [
    '',
    'Stablepay is running (embedded mode).',
    `  Gateway:          ${stack.url}`,
    `  Demo merchant:    ${stack.demoMerchantId}`,
    `  Demo API key:     ${stack.demoApiKey}`,
    `  Database:         ${stack.database}`,
    ...(stack.chains?.chains ?? []).map(
      (c) =>
        `  Chain ${c.caip2.padEnd(12)} ${c.rpcUrl}  (payment factory ${c.addresses.paymentFactory}, registry ${c.addresses.registry})`,
    ),
    ...(keys
      ? [
          `  Demo signer:      ${keys.signer}  (also its settlement address; sandbox key, local chains only)`,
          `  Demo pauser:      ${keys.pauser}`,
          `  Demo keys:        ${keys.file ?? 'this run only (in-memory data)'}`,
        ]
      : stack.chains
        ? [
            '  Demo merchant has its own signer: checkouts need it registered on chain (GET /settings chain_registrations).',
          ]
        : []),
    '',
    `  Try: curl -s ${stack.url}/settings -H "Authorization: Bearer ${stack.demoApiKey}"`,
    ...(keys
      ? [
          `       curl -s -X POST ${stack.url}/checkouts -H "Authorization: Bearer ${stack.demoApiKey}" \\`,
          `         -H 'Content-Type: application/json' -d '{"amount":"5000000","currency":"USD"}'`,
        ]
      : []),
    '',
  ].join('\n');
  process.stdout.write(banner + '\n');
  process.stdout.write(
    JSON.stringify({
      ready: true,
      url: stack.url,
      demo_merchant_id: stack.demoMerchantId,
      demo_api_key: stack.demoApiKey,
      ...(keys
        ? { demo_merchant_signer: keys.signer, demo_merchant_pauser: keys.pauser, demo_keys_file: keys.file }
        : {}),
    }) + '\n',
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`received ${signal}, shutting down\n`);
    stack.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`Stablepay failed to start: ${message}\n`);
  const config = error instanceof ConfigError || /environment variable/.test(message);
  process.exit(config ? 78 : 1);
});
