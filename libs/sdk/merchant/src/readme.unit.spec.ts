import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ethers from 'ethers';
import { Wallet } from 'ethers';
import ts from 'typescript';
import {
  encodeType,
  quoteHash,
  stablepayDomain,
  verifyTypedDataSigner,
  type RequestKind,
} from '@stablepay/evm';
import * as sdk from './index';

/**
 * The README is what a merchant's developer copies on day one: its signing snippets are run here as written, with
 * the API's answers as fixtures, and what they would post must be what the API checks. They once left out `epoch`,
 * which every helper requires, so each threw before signing anything.
 */
const README = readFileSync(join(__dirname, '..', 'README.md'), 'utf8');
const SIGNER_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80'; // anvil dev key 0
const signer = new Wallet(SIGNER_KEY);
const MANAGER = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const DEPOSIT = '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512';
const TOKEN = '0x3F3F35A3Db8Fc2Baa6120ca31B633A5bBA648296';
const PAYER = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const STRAY = '0xf12f62D15E3b5741Da661c3c976DFc4ee84A80E2';
const DESTINATION = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';

// As GET /settings, GET /subscriptions/:id, POST .../charge-quote and GET /payments/:id answer them. The epochs
// differ per chain, so a snippet reading another chain's entry signs what the API refuses.
const settings = {
  subscription_manager_address: MANAGER,
  chain_registrations: [
    { chain: 'eip155:137', epoch: '5' },
    { chain: 'eip155:8453', epoch: '3' },
  ],
};
const subscription = {
  subscription_id: '0x7cc75d0e4761fac18180049bfc8cff4bb70aad1cd4c47ab1afcd0dc9826cbeb7',
  chain: 'eip155:8453',
  charge_nonce: 1,
};
const quote = { amount: '842683', quote_code: 'refq_3fde0f26881cf44810c67a4d' };
const payment = {
  on_chain_id: '0x' + '11'.repeat(32),
  deposit_address: DEPOSIT,
  detected_chain: 'eip155:8453',
  detected_asset: `eip155:8453/erc20:${TOKEN}`,
  token_amount: '5000000',
  payer_addresses: [PAYER],
};
const EPOCH = 3n;

type Posted = {
  signature?: string;
  body?: Record<string, unknown>;
  capture?: { signature: string };
  refund?: { signature: string };
  rescue?: { signature: string };
};

function tsBlocks(): string[] {
  return [...README.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
}

function blockCalling(helper: string): string {
  const block = tsBlocks().find((b) => b.includes(`await ${helper}(`));
  if (!block) throw new Error(`The README shows no ${helper} example`);
  return block;
}

/**
 * Runs a snippet as a merchant would: its imports bound to this SDK and ethers, the names it takes from the first
 * snippet given, the fixtures in scope. Answers what it would post.
 */
async function run(block: string): Promise<Posted> {
  const imports = block.replace(
    /^import \{([^}]*)\} from '([^']+)';$/gm,
    (_all, names: string, from: string) => `const {${names}} = __modules[${JSON.stringify(from)}];`,
  );
  const source = `return (async () => { {\n${imports}\nreturn {
    signature: typeof signature === 'undefined' ? undefined : signature,
    body: typeof body === 'undefined' ? undefined : body,
    capture: typeof capture === 'undefined' ? undefined : capture,
    refund: typeof refund === 'undefined' ? undefined : refund,
    rescue: typeof rescue === 'undefined' ? undefined : rescue,
  }; } })();`;
  const js = ts.transpileModule(`function __snippet() {${source}}`, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.None },
  }).outputText;
  const body = js.slice(js.indexOf('{') + 1, js.lastIndexOf('}'));
  const scope = {
    // A later snippet goes on in the file of the first: the helpers imported, its signer, registration and deadline.
    ...sdk,
    __modules: { ethers, '@stablepay/merchant-sdk': sdk },
    process: { env: { STABLEPAY_MERCHANT_SIGNER_KEY: SIGNER_KEY } },
    signer,
    registration: settings.chain_registrations.find((r) => r.chain === subscription.chain),
    deadline: Math.floor(Date.now() / 1000) + 300,
    settings,
    subscription,
    quote,
    payment,
    strayTokenAddress: STRAY,
    strayAmount: '7',
    destination: DESTINATION,
  };
  const fn = new Function(...Object.keys(scope), body) as (...args: unknown[]) => Promise<Posted>;
  return fn(...Object.values(scope));
}

const base = stablepayDomain(8453n, MANAGER);
const escrow = stablepayDomain(8453n, DEPOSIT);

describe('merchant SDK README snippets', () => {
  it('the charge snippet signs at the subscription chain epoch and posts the amount, nonce and deadline it signed', async () => {
    const { signature, body } = await run(blockCalling('signCharge'));
    expect(body).toEqual({
      amount: quote.amount,
      nonce: subscription.charge_nonce,
      deadline: expect.any(Number),
      signature,
      quote_code: quote.quote_code,
    });
    const message = {
      subscriptionId: subscription.subscription_id,
      amount: BigInt(quote.amount),
      nonce: BigInt(subscription.charge_nonce),
      quoteHash: quoteHash(quote.quote_code),
      epoch: EPOCH,
      deadline: BigInt(body?.['deadline'] as number),
    };
    expect(verifyTypedDataSigner('Charge', base, message, signature as string)).toBe(signer.address);
  });

  it('the cancel snippet signs at the subscription chain epoch and posts the nonce and deadline it signed', async () => {
    const { signature, body } = await run(blockCalling('signCancelSubscription'));
    expect(body).toEqual({ nonce: subscription.charge_nonce, deadline: expect.any(Number), signature });
    const message = {
      subscriptionId: subscription.subscription_id,
      nonce: BigInt(subscription.charge_nonce),
      epoch: EPOCH,
      deadline: BigInt(body?.['deadline'] as number),
    };
    expect(verifyTypedDataSigner('CancelSubscription', base, message, signature as string)).toBe(
      signer.address,
    );
  });

  it('the escrow snippet signs capture, refund (to the attested payer) and rescue at the payment chain epoch', async () => {
    const { capture, refund, rescue, body } = await run(blockCalling('signCapture'));
    expect(body).toEqual({
      amount: payment.token_amount,
      deadline: expect.any(Number),
      signature: capture?.signature,
    });
    const fields = {
      paymentId: payment.on_chain_id,
      token: TOKEN,
      amount: BigInt(payment.token_amount),
      epoch: EPOCH,
      deadline: BigInt(body?.['deadline'] as number),
    };
    expect(verifyTypedDataSigner('Capture', escrow, fields, capture?.signature as string)).toBe(
      signer.address,
    );
    const refundMessage = { ...fields, payer: PAYER };
    expect(verifyTypedDataSigner('Refund', escrow, refundMessage, refund?.signature as string)).toBe(
      signer.address,
    );
    const rescueMessage = { ...fields, token: STRAY, to: DESTINATION, amount: 7n };
    expect(verifyTypedDataSigner('Rescue', escrow, rescueMessage, rescue?.signature as string)).toBe(
      signer.address,
    );
  });

  it('the signed message table names each primary type as the helpers sign it', () => {
    const rows = [...README.matchAll(/^\| (sign\w+) +\| `(\w+)\(([^`]*)\)` +\|$/gm)];
    const table = Object.fromEntries(rows.map((r) => [r[1], `${r[2]}(${r[3]})`]));
    const helpers: Record<string, RequestKind> = {
      signCharge: 'Charge',
      signCancelSubscription: 'CancelSubscription',
      signCapture: 'Capture',
      signRefund: 'Refund',
      signRescue: 'Rescue',
      signDisputePayer: 'DisputePayer',
      signMerchantChange: 'MerchantChange',
      signRevokeAuthorizations: 'RevokeAuthorizations',
      signPayoutRefund: 'PayoutRefund',
    };
    expect(table).toEqual(Object.fromEntries(Object.entries(helpers).map(([h, k]) => [h, encodeType(k)])));
    // Every signer helper the package exports is in the table.
    expect(
      Object.keys(sdk)
        .filter((name) => /^sign(?!Webhook)/.test(name))
        .sort(),
    ).toEqual(Object.keys(helpers).sort());
  });
});
