/**
 * Measures gasUsed from real receipts on a fresh anvil for every external state-changing function, and prints the
 * README table (or rewrites it in place with --write):
 *
 *   node -r @swc-node/register libs/chain/contracts/scripts/gas-report.ts [--write]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MaxUint256, ZeroAddress, Wallet, id, parseEther, toBeHex } from 'ethers';
import { deployDeterministic, stablepayInitCodes, testStablecoinInitCodeFor } from '../src/deployment';
import { PaymentMethod } from '../src/enums';
import { connectPaymentDeposit } from '../src/generated/PaymentDeposit';
import { connectStablepayRegistry } from '../src/generated/StablepayRegistry';
import { startTestChain } from '../src/test-support/anvil';
import {
  FAR_DEADLINE,
  deployFixture,
  mined,
  signCancel,
  signCapture,
  signCharge,
  signRefund,
  signRescue,
  signSubscribe,
} from '../src/test-support/fixture';

interface Row {
  readonly contract: string;
  readonly fn: string;
  readonly scenario: string;
  readonly gas: bigint;
}

const USDC = 10n ** 6n;

async function main(): Promise<void> {
  const rows: Row[] = [];
  const add = (contract: string, fn: string, scenario: string, r: { readonly gasUsed?: bigint }): void => {
    if (r.gasUsed === undefined) throw new Error(`no gas measured for ${contract}.${fn}`);
    rows.push({ contract, fn, scenario, gas: r.gasUsed });
  };

  // Deterministic deployment of the root contracts, measured on a chain of its own.
  const deployChain = await startTestChain(8453);
  try {
    const operator = deployChain.account(0);
    const roles = { operator: operator.address, operatorPauser: deployChain.account(1).address };
    const init = stablepayInitCodes(roles);
    add(
      '(deployment proxy)',
      'StablepayRegistry',
      'CREATE2 via 0x4e59…956C',
      await deployDeterministic(operator, init.registry),
    );
    add(
      '(deployment proxy)',
      'PaymentFactory',
      'CREATE2, creates the deposit implementation too',
      await deployDeterministic(operator, init.paymentFactory),
    );
    add(
      '(deployment proxy)',
      'SubscriptionManagerFactory',
      'CREATE2',
      await deployDeterministic(operator, init.subscriptionManagerFactory),
    );
    add(
      '(deployment proxy)',
      'TestStablecoin',
      'CREATE2 (USDC, 6 decimals)',
      await deployDeterministic(operator, testStablecoinInitCodeFor('USDC')),
    );
  } finally {
    await deployChain.stop();
  }

  const chain = await startTestChain(8453);
  try {
    const f = await deployFixture(chain);
    const manager = await f.manager.getAddress();
    const usdc = await f.usdc.getAddress();
    const dai = await f.dai.getAddress();

    // ---------------------------------------------------------------------------------------- registry
    const registry = connectStablepayRegistry(f.addresses.registry, f.operator);
    add(
      'StablepayRegistry',
      'setMerchant',
      'new merchant: signer + settlement',
      await mined(registry.setMerchant(id('gas:m1'), Wallet.createRandom().address, f.settlement)),
    );
    add(
      'StablepayRegistry',
      'setMerchant',
      'rotate the signer only',
      await mined(registry.setMerchant(id('gas:m1'), Wallet.createRandom().address, f.settlement)),
    );
    add(
      'StablepayRegistry',
      'setOperatorPauser',
      '',
      await mined(registry.setOperatorPauser(f.operatorPauser.address)),
    );
    add(
      'StablepayRegistry',
      'transferOperator',
      '',
      await mined(registry.transferOperator(f.operator.address)),
    );
    add(
      'StablepayRegistry',
      'acceptOperator',
      '',
      await mined(registry.connect(f.operator).acceptOperator()),
    );

    // ---------------------------------------------------------------------------------------- payments
    let n = 0;
    const fund = async (amount: bigint, token = f.usdc) => {
      n += 1;
      const paymentId = id(`gas:payment:${n}`);
      const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
      await mined(token.mint(address, amount));
      return { paymentId, address };
    };
    const direct = await fund(100n * USDC);
    add(
      'PaymentFactory',
      'deployDeposit',
      'DIRECT: clone + forward to settlement',
      await mined(
        f.paymentFactory.deployDeposit(
          f.merchantId,
          direct.paymentId,
          PaymentMethod.DIRECT,
          usdc,
          f.payer.address,
          100n * USDC,
        ),
      ),
    );
    const escrow = await fund(100n * USDC);
    add(
      'PaymentFactory',
      'deployDeposit',
      'TWO_STEP: clone + escrow',
      await mined(
        f.paymentFactory.deployDeposit(
          f.merchantId,
          escrow.paymentId,
          PaymentMethod.TWO_STEP,
          usdc,
          f.payer.address,
          100n * USDC,
        ),
      ),
    );
    const abandoned = await fund(100n * USDC);
    add(
      'PaymentFactory',
      'deployDeposit',
      'NONE: clone only (abandoned / strays)',
      await mined(
        f.paymentFactory.deployDeposit(
          f.merchantId,
          abandoned.paymentId,
          PaymentMethod.NONE,
          usdc,
          f.payer.address,
          0n,
        ),
      ),
    );
    add(
      'PaymentFactory',
      'flagPayment',
      '',
      await mined(f.paymentFactory.flagPayment(f.merchantId, id('gas:flagged'))),
    );

    const escrowDeposit = connectPaymentDeposit(escrow.address, f.relayer);
    const capSig = await signCapture(f.merchantSigner, f.chainId, escrow.address, {
      paymentId: escrow.paymentId,
      token: usdc,
      amount: 60n * USDC,
      deadline: FAR_DEADLINE,
    });
    add(
      'PaymentDeposit',
      'capture',
      'partial (60 of 100)',
      await mined(escrowDeposit.capture(usdc, 60n * USDC, FAR_DEADLINE, capSig)),
    );
    const refSig = await signRefund(f.merchantSigner, f.chainId, escrow.address, {
      paymentId: escrow.paymentId,
      token: usdc,
      amount: 40n * USDC,
      deadline: FAR_DEADLINE,
    });
    add(
      'PaymentDeposit',
      'refund',
      'the rest (40)',
      await mined(escrowDeposit.refund(usdc, 40n * USDC, FAR_DEADLINE, refSig)),
    );
    await mined(f.dai.mint(escrow.address, parseEther('1')));
    const resSig = await signRescue(f.merchantSigner, f.chainId, escrow.address, {
      paymentId: escrow.paymentId,
      token: dai,
      to: f.stranger.address,
      amount: parseEther('1'),
      deadline: FAR_DEADLINE,
    });
    add(
      'PaymentDeposit',
      'rescue',
      'another ERC-20 token',
      await mined(escrowDeposit.rescue(dai, f.stranger.address, parseEther('1'), FAR_DEADLINE, resSig)),
    );
    await chain.provider.send('anvil_setBalance', [escrow.address, toBeHex(parseEther('1'))]);
    const nativeSig = await signRescue(f.merchantSigner, f.chainId, escrow.address, {
      paymentId: escrow.paymentId,
      token: ZeroAddress,
      to: f.stranger.address,
      amount: parseEther('1'),
      deadline: FAR_DEADLINE,
    });
    add(
      'PaymentDeposit',
      'rescue',
      'native coin',
      await mined(
        escrowDeposit.rescue(ZeroAddress, f.stranger.address, parseEther('1'), FAR_DEADLINE, nativeSig),
      ),
    );
    add(
      'PaymentDeposit',
      'recover',
      'abandoned deposit to the payer',
      await mined(connectPaymentDeposit(abandoned.address, f.operator).recover()),
    );

    // ---------------------------------------------------------------------------------------- subscriptions
    add(
      'SubscriptionManagerFactory',
      'deployManager',
      'CREATE2 of a SubscriptionManager',
      await mined(f.managerFactory.deployManager(id('gas:m2'), f.stranger.address)),
    );
    await mined(f.usdc.connect(f.subscriber).mint(f.subscriber.address, 100_000n * USDC));
    await mined(f.usdc.connect(f.subscriber).approve(manager, MaxUint256));
    const subscriptionId = id('gas:subscription');
    const auth = {
      subscriptionId,
      subscriber: f.subscriber.address,
      token: usdc,
      cap: 100n * USDC,
      budget: 300n * USDC,
      periodDuration: 30n * 86_400n,
      firstChargeAmount: 50n * USDC,
      deadline: FAR_DEADLINE,
    };
    const authSig = await signSubscribe(f.operator, f.chainId, manager, auth);
    add(
      'SubscriptionManager',
      'subscribe',
      'register + first charge (nonce 0)',
      await mined(f.manager.connect(f.subscriber).subscribe(auth, authSig)),
    );
    const chargeOnce = async (nonce: bigint) => {
      const m = {
        subscriptionId,
        amount: 10n * USDC,
        nonce,
        quoteHash: id(`refq_${nonce}`),
        deadline: FAR_DEADLINE,
      };
      const sig = await signCharge(f.merchantSigner, f.chainId, manager, m);
      return mined(f.manager.charge(subscriptionId, m.amount, nonce, m.quoteHash, FAR_DEADLINE, sig));
    };
    add('SubscriptionManager', 'charge', 'same window as the last charge', await chargeOnce(1n));
    await chain.increaseTime(30 * 86_400);
    add('SubscriptionManager', 'charge', 'first charge of a new window', await chargeOnce(2n));
    add(
      'SubscriptionManager',
      'updateCap',
      '',
      await mined(f.manager.connect(f.subscriber).updateCap(subscriptionId, 120n * USDC)),
    );
    add(
      'SubscriptionManager',
      'updateBudget',
      '',
      await mined(f.manager.connect(f.subscriber).updateBudget(subscriptionId, 400n * USDC)),
    );
    add(
      'SubscriptionManager',
      'proposeMigration',
      '',
      await mined(f.manager.connect(f.subscriber).proposeMigration(subscriptionId, f.newWallet.address)),
    );
    add(
      'SubscriptionManager',
      'acceptMigration',
      '',
      await mined(f.manager.connect(f.newWallet).acceptMigration(subscriptionId)),
    );
    add(
      'SubscriptionManager',
      'pause',
      'merchant pauser',
      await mined(f.manager.connect(f.merchantPauser).pause()),
    );
    add(
      'SubscriptionManager',
      'unpause',
      'merchant pauser',
      await mined(f.manager.connect(f.merchantPauser).unpause()),
    );
    const cancelSig = await signCancel(f.merchantSigner, f.chainId, manager, {
      subscriptionId,
      nonce: 3n,
      deadline: FAR_DEADLINE,
    });
    add(
      'SubscriptionManager',
      'merchantCancel',
      'CancelSubscription signature',
      await mined(f.manager.merchantCancel(subscriptionId, 3n, FAR_DEADLINE, cancelSig)),
    );
    const second = { ...auth, subscriptionId: id('gas:subscription:2') };
    await mined(
      f.manager
        .connect(f.subscriber)
        .subscribe(second, await signSubscribe(f.operator, f.chainId, manager, second)),
    );
    add(
      'SubscriptionManager',
      'subscriberCancel',
      '',
      await mined(f.manager.connect(f.subscriber).subscriberCancel(second.subscriptionId)),
    );

    add('TestStablecoin', 'mint', '', await mined(f.usdc.mint(f.stranger.address, 1n)));
    add('TestStablecoin', 'approve', '', await mined(f.usdc.connect(f.stranger).approve(manager, 1n)));
    add(
      'TestStablecoin',
      'transfer',
      '',
      await mined(f.usdc.connect(f.stranger).transfer(f.relayer.address, 1n)),
    );
    await mined(f.usdc.connect(f.stranger).approve(f.relayer.address, 1n));
    await mined(f.usdc.mint(f.stranger.address, 1n));
    add(
      'TestStablecoin',
      'transferFrom',
      '',
      await mined(f.usdc.connect(f.relayer).transferFrom(f.stranger.address, f.relayer.address, 1n)),
    );
  } finally {
    await chain.stop();
  }

  const lines = [
    '| Contract | Function | Scenario | Gas used |',
    '|---|---|---|---:|',
    ...rows.map((r) => `| ${r.contract} | \`${r.fn}\` | ${r.scenario} | ${r.gas.toLocaleString('en-US')} |`),
  ];
  const table = lines.join('\n');
  if (process.argv.includes('--write')) {
    const readme = join(__dirname, '..', 'README.md');
    const text = readFileSync(readme, 'utf8');
    const start = '<!-- gas-table:start -->';
    const end = '<!-- gas-table:end -->';
    const i = text.indexOf(start);
    const j = text.indexOf(end);
    if (i < 0 || j < i) throw new Error(`README.md lacks the ${start} / ${end} markers`);
    writeFileSync(readme, `${text.slice(0, i + start.length)}\n${table}\n${text.slice(j)}`);
    console.log(`wrote ${rows.length} rows to ${readme}`);
  } else {
    console.log(table);
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
