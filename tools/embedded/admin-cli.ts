/**
 * Operator CLI for the admin API.
 *   ADMIN_TOKEN=... npm run admin -- create-merchant --name "Acme" --mode test [--settlement-mode crypto|fiat] [--url http://localhost:3000]
 *   ADMIN_TOKEN=... npm run admin -- parked-streams [--url ...]
 *   ADMIN_TOKEN=... npm run admin -- retry-parked --projection <projection or consumer group> --stream <stream_id as listed> [--url ...]
 *   ADMIN_TOKEN=... npm run admin -- rescan-deposit --merchant <mer_...> (--payment <pay_...> | --customer <cus_...>) [--chain <caip2>] [--from-block <n>] [--url ...]
 *   ADMIN_TOKEN=... npm run admin -- record-withheld-refund-return --merchant <mer_...> --payout <po_...> --to <0x...> [--tx-hash <0x...>] [--reference <ref>] [--idempotency-key <key>] [--url ...]
 *   ADMIN_TOKEN=... npm run admin -- attest-payer --merchant <mer_...> --payment <pay_...> --payer <0x...> [--url ...]
 *   ADMIN_TOKEN=... npm run admin -- settlement-exposures [--mode test|live] [--limit <n>] [--starting-after <pay_...> | --ending-before <pay_...>] [--url ...]
 *   ADMIN_TOKEN=... npm run admin -- charge-settlement-exposures [--mode test|live] [--limit <n>] [--starting-after <subc_...> | --ending-before <subc_...>] [--url ...]
 * Prints the API's answer as JSON (a created merchant includes its secret API key, shown only once). A retry's
 * `status` is `applied`, `still_parked` (it ran; an event failed again) or `requested` (recorded on the row; the
 * process running the projection or group serves it within a second: list the parked streams to follow it); a
 * stream with no parked row (never parked, or released before) is the API's 404 `not_parked`. A deposit re-scan
 * answers the address, chain and first block of each re-scan the indexer now runs (docs/chain-operator.md). A
 * withheld refund's return answers the payout, refunded (docs/payouts.md, "Refund withheld at the off-ramp"); pass
 * the same --idempotency-key on a retry after a lost answer. A payer attestation (after the merchant disputed the
 * payer) answers the `attestPayer` call (`from` the registry admin, `to` the deposit, `data`, `chain_id`) for the
 * admin's cold key to sign and send; the service never holds that key (docs/payments.md, "Disputing the payer").
 * The settlement exposures are one page of every merchant's payments whose fiat payout stands for a deposit a reorg
 * took (merchant, payment, amount and currency to recover; docs/payments.md, "Fiat settlement"); the charge settlement
 * exposures the same for subscription charges (docs/subscriptions.md, "Settlement exposure").
 */
function option(args: readonly string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

const USAGE = [
  'usage: admin create-merchant --name <name> --mode test|live [--settlement-mode crypto|fiat] [--url <gateway url>]',
  '       admin parked-streams [--url <gateway url>]',
  '       admin retry-parked --projection <projection or consumer group> --stream <stream_id as listed> [--url <gateway url>]',
  '       admin rescan-deposit --merchant <mer_...> (--payment <pay_...> | --customer <cus_...>) [--chain <caip2>] [--from-block <n>] [--url <gateway url>]',
  '       admin record-withheld-refund-return --merchant <mer_...> --payout <po_...> --to <0x...> [--tx-hash <0x...>] [--reference <ref>] [--idempotency-key <key>] [--url <gateway url>]',
  '       admin attest-payer --merchant <mer_...> --payment <pay_...> --payer <0x...> [--url <gateway url>]',
  '       admin settlement-exposures [--mode test|live] [--limit <n>] [--starting-after <pay_...> | --ending-before <pay_...>] [--url <gateway url>]',
  '       admin charge-settlement-exposures [--mode test|live] [--limit <n>] [--starting-after <subc_...> | --ending-before <subc_...>] [--url <gateway url>]',
].join('\n');

/**
 * The settlement exposures page's route (payments', or subscription charges' with `of: 'charges'`): the options given
 * become its query (the API checks them).
 */
export function settlementExposuresPath(
  args: readonly string[],
  of: 'payments' | 'charges' = 'payments',
): string {
  const query = new URLSearchParams();
  for (const [flag, parameter] of [
    ['mode', 'mode'],
    ['limit', 'limit'],
    ['starting-after', 'starting_after'],
    ['ending-before', 'ending_before'],
  ] as const) {
    const value = option(args, flag);
    if (value !== undefined) query.set(parameter, value);
  }
  const search = query.toString();
  const route = of === 'charges' ? '/admin/charge-settlement-exposures' : '/admin/settlement-exposures';
  return `${route}${search ? `?${search}` : ''}`;
}

/** The payer attestation's route and body, or null without the merchant, payment and payer. */
export function payerAttestationRequest(
  args: readonly string[],
): { path: string; body: Record<string, unknown> } | null {
  const merchant = option(args, 'merchant');
  const payment = option(args, 'payment');
  const payer = option(args, 'payer');
  if (!merchant || !payment || !payer) return null;
  return {
    path: `/admin/merchants/${encodeURIComponent(merchant)}/payments/${encodeURIComponent(payment)}/payer-attestations`,
    // As given: the API refuses a malformed address, naming payer.
    body: { payer },
  };
}

/** The withheld refund return's route and body, or null without the merchant, payout and destination. */
function withheldReturnRequest(
  args: readonly string[],
): { path: string; body: Record<string, unknown> } | null {
  const merchant = option(args, 'merchant');
  const payout = option(args, 'payout');
  const to = option(args, 'to');
  if (!merchant || !payout || !to) return null;
  const txHash = option(args, 'tx-hash');
  const reference = option(args, 'reference');
  return {
    path: `/admin/merchants/${encodeURIComponent(merchant)}/payouts/${encodeURIComponent(payout)}/withheld-refund-returns`,
    // As given: the API refuses what is malformed (or neither proof), naming the field.
    body: {
      to,
      ...(txHash !== undefined ? { tx_hash: txHash } : {}),
      ...(reference !== undefined ? { reference } : {}),
    },
  };
}

/** The deposit re-scan's route and body, or null when the options do not name exactly one object. */
function rescanRequest(args: readonly string[]): { path: string; body: Record<string, unknown> } | null {
  const merchant = option(args, 'merchant');
  const payment = option(args, 'payment');
  const customer = option(args, 'customer');
  if (!merchant || (payment === undefined) === (customer === undefined)) return null;
  const object =
    payment !== undefined
      ? `payments/${encodeURIComponent(payment)}`
      : `customers/${encodeURIComponent(customer ?? '')}`;
  const chain = option(args, 'chain');
  const fromBlock = option(args, 'from-block');
  return {
    path: `/admin/merchants/${encodeURIComponent(merchant)}/${object}/deposit-rescans`,
    // The block goes as the string given: the API refuses what is not a block number, naming from_block.
    body: {
      ...(chain !== undefined ? { chain } : {}),
      ...(fromBlock !== undefined ? { from_block: fromBlock } : {}),
    },
  };
}

export async function runAdminCli(
  argv: string[],
  env: Record<string, string | undefined>,
  out: (s: string) => void,
): Promise<number> {
  const [command, ...args] = argv;
  const projection = option(args, 'projection');
  const stream = option(args, 'stream');
  if (
    command !== 'create-merchant' &&
    command !== 'parked-streams' &&
    command !== 'settlement-exposures' &&
    command !== 'charge-settlement-exposures' &&
    !(command === 'retry-parked' && projection && stream) &&
    !(command === 'rescan-deposit' && rescanRequest(args)) &&
    !(command === 'record-withheld-refund-return' && withheldReturnRequest(args)) &&
    !(command === 'attest-payer' && payerAttestationRequest(args))
  ) {
    out(USAGE);
    return 2;
  }
  const token = env['ADMIN_TOKEN'];
  if (!token) {
    out("ADMIN_TOKEN must be set to the gateway's operator token");
    return 2;
  }
  const url = gatewayUrl(args, env);
  const headers = { authorization: `Bearer ${token}` };
  let res: Response;
  try {
    res = await send(command, url, headers, args, projection, stream);
  } catch (error) {
    // fetch only says "fetch failed"; an operator whose gateway is not on the default port needs to know which
    // address was tried and how to name another.
    const { cause } = error as { cause?: { code?: string; message?: string } };
    const why = cause?.message || cause?.code || String(error);
    out(`could not reach the gateway at ${url} (${why}); pass --url <gateway url> or set STABLEPAY_URL`);
    return 1;
  }
  out(JSON.stringify(await res.json(), null, 2));
  return res.ok ? 0 : 1;
}

/**
 * The gateway to call: `--url`, else `STABLEPAY_URL`, else the embedded run's default. An empty value (a sourced
 * .env with `STABLEPAY_URL=`) counts as not given, not as an empty address.
 */
export function gatewayUrl(args: readonly string[], env: Record<string, string | undefined>): string {
  return option(args, 'url') || env['STABLEPAY_URL'] || 'http://127.0.0.1:3000';
}

function send(
  command: string | undefined,
  url: string,
  headers: Record<string, string>,
  args: string[],
  projection: string | undefined,
  stream: string | undefined,
): Promise<Response> {
  if (command === 'parked-streams') return fetch(`${url}/admin/parked-streams`, { headers });
  if (command === 'settlement-exposures') return fetch(`${url}${settlementExposuresPath(args)}`, { headers });
  if (command === 'charge-settlement-exposures')
    return fetch(`${url}${settlementExposuresPath(args, 'charges')}`, { headers });
  const rescan = command === 'rescan-deposit' ? rescanRequest(args) : null;
  if (rescan)
    return fetch(`${url}${rescan.path}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(rescan.body),
    });
  const attestation = command === 'attest-payer' ? payerAttestationRequest(args) : null;
  if (attestation)
    return fetch(`${url}${attestation.path}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(attestation.body),
    });
  const withheldReturn = command === 'record-withheld-refund-return' ? withheldReturnRequest(args) : null;
  if (withheldReturn)
    return fetch(`${url}${withheldReturn.path}`, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': 'application/json',
        'idempotency-key': option(args, 'idempotency-key') ?? crypto.randomUUID(),
      },
      body: JSON.stringify(withheldReturn.body),
    });
  if (command === 'retry-parked')
    return fetch(
      `${url}/admin/projections/${encodeURIComponent(projection ?? '')}/parked-streams/${encodeURIComponent(stream ?? '')}/retry`,
      { method: 'POST', headers },
    );
  const body = {
    name: option(args, 'name'),
    mode: option(args, 'mode'),
    ...(option(args, 'settlement-mode') ? { settlement_mode: option(args, 'settlement-mode') } : {}),
  };
  return fetch(`${url}/admin/merchants`, {
    method: 'POST',
    headers: {
      ...headers,
      'content-type': 'application/json',
      'idempotency-key': crypto.randomUUID(),
    },
    body: JSON.stringify(body),
  });
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
