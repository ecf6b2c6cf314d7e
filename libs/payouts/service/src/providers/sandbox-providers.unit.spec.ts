import { type KycSubject, SandboxKyc } from './kyc-provider';
import { type OffRampTransferRequest, SandboxOffRamp } from './off-ramp';
import type { ChainOperatorConfig } from '@stablepay/chain-operator';
import { payoutDepositAddress } from '@stablepay/contracts';
import { customerDepositAddressFor, sandboxDepositAddress } from './customer-deposit-address';

const subject = (name: string, email = 'a@example.com', resubmission = false): KycSubject => ({
  customerId: 'cus_1',
  type: 'individual',
  name,
  email,
  resubmission,
});
const transfer = (accountNumber: string, amount = '25000000', currency = 'USD'): OffRampTransferRequest => ({
  payoutId: 'po_1',
  chain: 'eip155:8453',
  token: 'USDC',
  tokenDecimals: 6,
  amount,
  currency,
  beneficiary: {
    holderName: 'Ada',
    account: { kind: 'us_account', accountNumber, routingNumber: '110000000' },
  },
});

describe('sandbox KYC magic values (docs/payouts.md)', () => {
  const kyc = new SandboxKyc();

  it('approves an ordinary customer', async () => {
    expect(await kyc.review(subject('Ada'))).toEqual({ outcome: 'approved' });
  });

  it('kyc_failed in the name or email rejects', async () => {
    expect(await kyc.review(subject('x', 'x+kyc_failed@example.com'))).toMatchObject({ outcome: 'rejected' });
    expect(await kyc.review(subject('KYC_FAILED'))).toMatchObject({ outcome: 'rejected' });
  });

  it('action_required asks once, then approves the resubmission', async () => {
    expect(await kyc.review(subject('action_required'))).toMatchObject({ outcome: 'action_required' });
    expect(await kyc.review(subject('action_required', undefined, true))).toEqual({ outcome: 'approved' });
  });

  it('suspended is approved, then suspended by monitoring', async () => {
    expect(await kyc.review(subject('suspended'))).toEqual({ outcome: 'approved' });
    expect(await kyc.monitor(subject('suspended'))).toEqual({ suspend: true, reason: 'compliance_review' });
    expect(await kyc.monitor(subject('Ada'))).toEqual({ suspend: false });
  });
});

describe('sandbox off-ramp magic values (docs/payouts.md)', () => {
  const offRamp = new SandboxOffRamp();
  const status = async (request: OffRampTransferRequest) =>
    offRamp.status((await offRamp.submit(request)).transferId, request);

  it('completes at the sandbox rate in fiat minor units', async () => {
    expect(await status(transfer('123456789'))).toEqual({ state: 'completed', fiatAmount: '2500' });
    expect(await status(transfer('123456789', '25000000', 'EUR'))).toEqual({
      state: 'completed',
      fiatAmount: '2300',
    });
  });

  it.each([
    ['1230002', '25000000', 'rampoff_withdraw_failed'],
    ['1230003', '25000000', 'provider_rejected'],
    ['123456789', '10000666', 'rampoff_order_failed'],
  ])('account %s, amount %s: %s', async (account, amount, reason) => {
    expect(await status(transfer(account, amount))).toEqual({ state: 'failed', reason });
  });

  it('names one transfer per payout (a resubmission is the same transfer)', async () => {
    expect(await offRamp.submit(transfer('1'))).toEqual(await offRamp.submit(transfer('2')));
  });
});

describe('customer deposit addresses', () => {
  const payouts = {
    factory: '0x1111111111111111111111111111111111111111',
    offRamp: '0x2222222222222222222222222222222222222222',
  };

  it('are the CREATE2 PayoutDeposit clone of merchant and customer where the chain layer configures payouts', () => {
    const derive = customerDepositAddressFor({ enabled: true, payouts } as unknown as ChainOperatorConfig);
    expect(derive('mer_1', 'cus_1')).toBe(
      payoutDepositAddress({ ...payouts, merchantId: 'mer_1', customerId: 'cus_1' }),
    );
    expect(derive('mer_1', 'cus_2')).not.toBe(derive('mer_1', 'cus_1'));
  });

  it('are refused (503) on a deployment with chains but no payouts configuration: never an address no one controls', () => {
    const derive = customerDepositAddressFor({
      enabled: true,
      payouts: null,
    } as unknown as ChainOperatorConfig);
    expect(() => derive('mer_1', 'cus_1')).toThrow(
      expect.objectContaining({ status: 503, code: 'payout_deposits_unavailable' }),
    );
  });

  it('fall back to the chain-less sandbox address without chains', () => {
    expect(customerDepositAddressFor(undefined)).toBe(sandboxDepositAddress);
    expect(
      customerDepositAddressFor({ enabled: false, payouts: null } as unknown as ChainOperatorConfig),
    ).toBe(sandboxDepositAddress);
    expect(sandboxDepositAddress('mer_1', 'cus_1')).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(sandboxDepositAddress('mer_1', 'cus_1')).toBe(sandboxDepositAddress('mer_1', 'cus_1'));
  });
});
