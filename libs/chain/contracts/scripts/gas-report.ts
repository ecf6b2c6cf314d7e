/**
 * Measures gasUsed from real receipts on a fresh anvil for every external state-changing function, and prints the
 * README table (or rewrites it in place with --write):
 *
 *   node -r @swc-node/register libs/chain/contracts/scripts/gas-report.ts [--write]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MaxUint256, ZeroAddress, Wallet, getAddress, id, parseEther, toBeHex } from 'ethers';
import { deployDeterministic, stablepayInitCodes, testStablecoinInitCodeFor } from '../src/deployment';
import { PaymentMethod } from '../src/enums';
import { connectPaymentDeposit } from '../src/generated/PaymentDeposit';
import { connectPayoutDeposit } from '../src/generated/PayoutDeposit';
import { connectStablepayRegistry } from '../src/generated/StablepayRegistry';
import { startTestChain } from '../src/test-support/anvil';
import {
  deployFixture,
  mined,
  signCancel,
  signCapture,
  signCharge,
  signDisputePayer,
  signMerchantChange,
  signPayoutRefund,
  signRefund,
  signRescue,
  signRevokeAuthorizations,
  signSubscribe,
  soon,
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
    const roles = {
      admin: deployChain.account(9).address,
      operator: operator.address,
      operatorPauser: deployChain.account(1).address,
    };
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
      'PayoutDepositFactory',
      'CREATE2, creates the payout deposit implementation too',
      await deployDeterministic(operator, init.payoutDepositFactory),
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
    const asAdmin = registry.connect(f.admin);
    const gasMerchant = id('gas:m1');
    add(
      'StablepayRegistry',
      'registerMerchant',
      'new merchant: signer + settlement',
      await mined(registry.registerMerchant(gasMerchant, f.merchantSigner.address, f.settlement)),
    );
    {
      const deadline = await soon(f);
      const signer = Wallet.createRandom().address;
      const sig = await signMerchantChange(f.merchantSigner, f.chainId, f.addresses.registry, {
        merchantId: gasMerchant,
        signer: f.merchantSigner.address,
        settlement: signer,
        deadline,
      });
      add(
        'StablepayRegistry',
        'changeMerchant',
        'consented by the current signer: settlement only',
        await mined(registry.changeMerchant(gasMerchant, f.merchantSigner.address, signer, deadline, sig)),
      );
    }
    {
      const deadline = await soon(f);
      const sig = await signRevokeAuthorizations(f.merchantSigner, f.chainId, f.addresses.registry, {
        merchantId: gasMerchant,
        epoch: 1n,
        deadline,
      });
      add(
        'StablepayRegistry',
        'revokeAuthorizationsBySig',
        'epoch bump',
        await mined(registry.revokeAuthorizationsBySig(gasMerchant, deadline, sig)),
      );
    }
    const signerKey = f.merchantSigner.connect(chain.provider);
    await chain.provider.send('anvil_setBalance', [signerKey.address, toBeHex(parseEther('1'))]);
    add(
      'StablepayRegistry',
      'revokeAuthorizations',
      'from the signer key: epoch bump',
      await mined(registry.connect(signerKey).revokeAuthorizations(gasMerchant)),
    );
    add(
      'StablepayRegistry',
      'proposeMerchantChange',
      'admin, lost signer key',
      await mined(asAdmin.proposeMerchantChange(gasMerchant, Wallet.createRandom().address, f.settlement)),
    );
    await chain.increaseTime(2 * 86_400);
    add(
      'StablepayRegistry',
      'executeMerchantChange',
      'after the 2-day delay',
      await mined(registry.executeMerchantChange(gasMerchant)),
    );
    await mined(asAdmin.proposeMerchantChange(f.merchantId, Wallet.createRandom().address, f.settlement));
    add(
      'StablepayRegistry',
      'cancelMerchantChange',
      'admin',
      await mined(asAdmin.cancelMerchantChange(f.merchantId)),
    );
    add('StablepayRegistry', 'setOperator', 'admin', await mined(asAdmin.setOperator(f.operator.address)));
    add(
      'StablepayRegistry',
      'setOperatorPauser',
      'admin',
      await mined(asAdmin.setOperatorPauser(f.operatorPauser.address)),
    );
    add('StablepayRegistry', 'transferAdmin', '', await mined(asAdmin.transferAdmin(f.admin.address)));
    add('StablepayRegistry', 'acceptAdmin', '', await mined(asAdmin.acceptAdmin()));

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
          0n,
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
          (await chain.now()) + 7n * 86_400n,
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
    const deadline = await soon(f);
    const capSig = await signCapture(f.merchantSigner, f.chainId, escrow.address, {
      paymentId: escrow.paymentId,
      token: usdc,
      amount: 60n * USDC,
      deadline,
    });
    add(
      'PaymentDeposit',
      'capture',
      'partial (60 of 100)',
      await mined(escrowDeposit.capture(usdc, 60n * USDC, deadline, capSig)),
    );
    const refSig = await signRefund(f.merchantSigner, f.chainId, escrow.address, {
      paymentId: escrow.paymentId,
      token: usdc,
      payer: f.payer.address,
      amount: 20n * USDC,
      deadline,
    });
    add(
      'PaymentDeposit',
      'refund',
      'partial (20), to the signed payer',
      await mined(escrowDeposit.refund(usdc, f.payer.address, 20n * USDC, deadline, refSig)),
    );
    const asOperator = escrowDeposit.connect(f.operator);
    await mined(f.dai.mint(escrow.address, parseEther('1')));
    const resSig = await signRescue(f.merchantSigner, f.chainId, escrow.address, {
      paymentId: escrow.paymentId,
      token: dai,
      to: f.stranger.address,
      amount: parseEther('1'),
      deadline,
    });
    add(
      'PaymentDeposit',
      'rescue',
      'another ERC-20 token (operator-submitted)',
      await mined(asOperator.rescue(dai, f.stranger.address, parseEther('1'), deadline, resSig)),
    );
    await chain.provider.send('anvil_setBalance', [escrow.address, toBeHex(parseEther('1'))]);
    const nativeSig = await signRescue(f.merchantSigner, f.chainId, escrow.address, {
      paymentId: escrow.paymentId,
      token: ZeroAddress,
      to: f.stranger.address,
      amount: parseEther('1'),
      deadline,
    });
    add(
      'PaymentDeposit',
      'rescue',
      'native coin',
      await mined(asOperator.rescue(ZeroAddress, f.stranger.address, parseEther('1'), deadline, nativeSig)),
    );
    const abandonedDeposit = connectPaymentDeposit(abandoned.address, f.relayer);
    const disputeSig = await signDisputePayer(f.merchantSigner, f.chainId, abandoned.address, {
      paymentId: abandoned.paymentId,
      payer: f.payer.address,
      deadline,
    });
    add(
      'PaymentDeposit',
      'disputePayer',
      'merchant-signed, within the challenge period',
      await mined(abandonedDeposit.disputePayer(f.payer.address, deadline, disputeSig)),
    );
    add(
      'PaymentDeposit',
      'attestPayer',
      'admin, after a dispute',
      await mined(abandonedDeposit.connect(f.admin).attestPayer(f.payer.address)),
    );
    await chain.increaseTime(8 * 86_400);
    add(
      'PaymentDeposit',
      'recover',
      'abandoned deposit to the final payer',
      await mined(abandonedDeposit.connect(f.operator).recover()),
    );
    add(
      'PaymentDeposit',
      'reclaim',
      'escrow after the authorization expiry',
      await mined(escrowDeposit.reclaim()),
    );

    // ---------------------------------------------------------------------------------------- payouts (beta)
    const offRamp = getAddress(id('gas:off-ramp').slice(0, 42));
    const customer = id('gas:customer');
    const customerAddress = await f.payoutFactory.depositAddress(f.merchantId, customer, offRamp);
    await mined(f.usdc.mint(customerAddress, 100n * USDC));
    add(
      'PayoutDepositFactory',
      'sweep',
      "first sweep: clone + the payout's USDC to the off-ramp",
      await mined(
        f.payoutFactory.sweep(f.merchantId, customer, offRamp, usdc, 100n * USDC, id('gas:payout1')),
      ),
    );
    await mined(f.usdc.mint(customerAddress, 100n * USDC));
    add(
      'PayoutDepositFactory',
      'sweep',
      'later sweep (deployed)',
      await mined(
        f.payoutFactory.sweep(f.merchantId, customer, offRamp, usdc, 100n * USDC, id('gas:payout2')),
      ),
    );
    const payoutDeposit = connectPayoutDeposit(customerAddress, f.operator);
    await mined(f.usdc.mint(customerAddress, 100n * USDC));
    add(
      'PayoutDeposit',
      'sweep',
      'operator, on the deployed clone',
      await mined(payoutDeposit.sweep(usdc, 100n * USDC, id('gas:payout3'))),
    );
    const refunded = id('gas:customer2');
    add(
      'PayoutDepositFactory',
      'deployDeposit',
      'clone only',
      await mined(f.payoutFactory.deployDeposit(f.merchantId, refunded, offRamp)),
    );
    const refundAddress = await f.payoutFactory.depositAddress(f.merchantId, refunded, offRamp);
    await mined(f.usdc.mint(refundAddress, 100n * USDC));
    const payoutRefundDeadline = await soon(f);
    const payoutRefundSig = await signPayoutRefund(f.merchantSigner, f.chainId, refundAddress, {
      payoutId: id('gas:payout4'),
      token: usdc,
      to: f.payer.address,
      amount: 100n * USDC,
      deadline: payoutRefundDeadline,
    });
    add(
      'PayoutDeposit',
      'refund',
      'merchant-signed destination, operator-submitted',
      await mined(
        connectPayoutDeposit(refundAddress, f.operator).refund(
          usdc,
          f.payer.address,
          100n * USDC,
          id('gas:payout4'),
          payoutRefundDeadline,
          payoutRefundSig,
        ),
      ),
    );

    const refundedViaFactory = id('gas:customer3');
    const viaFactoryAddress = await f.payoutFactory.depositAddress(f.merchantId, refundedViaFactory, offRamp);
    await mined(f.usdc.mint(viaFactoryAddress, 100n * USDC));
    const viaFactorySig = await signPayoutRefund(f.merchantSigner, f.chainId, viaFactoryAddress, {
      payoutId: id('gas:payout5'),
      token: usdc,
      to: f.payer.address,
      amount: 100n * USDC,
      deadline: payoutRefundDeadline,
    });
    add(
      'PayoutDepositFactory',
      'refund',
      'clone + merchant-signed refund in one transaction',
      await mined(
        f.payoutFactory.refund(
          f.merchantId,
          refundedViaFactory,
          offRamp,
          usdc,
          f.payer.address,
          100n * USDC,
          id('gas:payout5'),
          payoutRefundDeadline,
          viaFactorySig,
        ),
      ),
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
      deadline: await soon(f),
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
        deadline: await soon(f),
      };
      const sig = await signCharge(f.merchantSigner, f.chainId, manager, m);
      return mined(f.manager.charge(subscriptionId, m.amount, nonce, m.quoteHash, m.deadline, sig));
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
      await mined(f.manager.connect(f.newWallet).acceptMigration(subscriptionId, 120n * USDC, 400n * USDC)),
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
    const cancelDeadline = await soon(f);
    const cancelSig = await signCancel(f.merchantSigner, f.chainId, manager, {
      subscriptionId,
      nonce: 3n,
      deadline: cancelDeadline,
    });
    add(
      'SubscriptionManager',
      'merchantCancel',
      'CancelSubscription signature',
      await mined(f.manager.merchantCancel(subscriptionId, 3n, cancelDeadline, cancelSig)),
    );
    const second = { ...auth, subscriptionId: id('gas:subscription:2'), deadline: await soon(f) };
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
