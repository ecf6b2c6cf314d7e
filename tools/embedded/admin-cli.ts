/**
 * Operator CLI for the admin API.
 *   ADMIN_TOKEN=... npm run admin -- create-merchant --name "Acme" --mode test [--settlement-mode crypto|fiat] [--url http://localhost:3000]
 * Prints the created merchant (including its secret API key, shown only once) as JSON.
 */
function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

export async function runAdminCli(
  argv: string[],
  env: Record<string, string | undefined>,
  out: (s: string) => void,
): Promise<number> {
  const [command, ...args] = argv;
  if (command !== 'create-merchant') {
    out(
      'usage: admin create-merchant --name <name> --mode test|live [--settlement-mode crypto|fiat] [--url <gateway url>]',
    );
    return 2;
  }
  const token = env['ADMIN_TOKEN'];
  if (!token) {
    out("ADMIN_TOKEN must be set to the gateway's operator token");
    return 2;
  }
  const url = option(args, 'url') ?? env['STABLEPAY_URL'] ?? 'http://127.0.0.1:3000';
  const body = {
    name: option(args, 'name'),
    mode: option(args, 'mode'),
    ...(option(args, 'settlement-mode') ? { settlement_mode: option(args, 'settlement-mode') } : {}),
  };
  const res = await fetch(`${url}/admin/merchants`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'idempotency-key': crypto.randomUUID(),
    },
    body: JSON.stringify(body),
  });
  out(JSON.stringify(await res.json(), null, 2));
  return res.ok ? 0 : 1;
}

if (require.main === module) {
  runAdminCli(process.argv.slice(2), process.env, (s) => process.stdout.write(s + '\n')).then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
