import { getAddress } from 'ethers';
import { DomainError } from '@stablepay/util';
import type { CustomerStatus } from './customer';
import {
  decidePayout,
  HELD_FAILURE_REASONS,
  heldRefund,
  initialPayoutState,
  parseWithheldRefundReturnInput,
  PAYOUT_WEBHOOK_BY_EVENT,
  type PayoutFailureReason,
  type CreatePayoutInput,
  type PayoutCommand,
  payoutDecider,
  type PayoutEvent,
  payoutObject,
  type PayoutState,
  parseRefundHeldInput,
  withheldRefundReturn,
} from './payout';

const now = new Date('2026-06-01T10:00:00.000Z');
const ADDRESS = '0x1111111111111111111111111111111111111111';
const SENDER = '0x2222222222222222222222222222222222222222';
const USDC = { chain: 'eip155:8453', symbol: 'USDC', asset: 'eip155:8453/erc20:0xusdc', decimals: 6 };

const given = (events: PayoutEvent[]): PayoutState =>
  events.reduce(payoutDecider.evolve, payoutDecider.initialState());
const errorOf = (f: () => unknown): DomainError => {
  try {
    f();
  } catch (e) {
    if (e instanceof DomainError) return e;
  }
  throw new Error('expected a DomainError');
};
const create = (input: CreatePayoutInput = {}, status: CustomerStatus = 'active'): PayoutCommand => ({
  type: 'CreatePayout',
  id: 'po_1',
  input: {
    customer: 'cus_1',
    beneficiary: 'bnf_1',
    amount: '25000000',
    chain: 'eip155:8453',
    token: 'usdc',
    ...input,
  },
  context: {
    customer: { id: 'cus_1', status, depositAddress: ADDRESS },
    beneficiary: { id: 'bnf_1', currency: 'USD' },
    tokens: [USDC],
  },
  now,
});
/** Runs the commands in order from nothing; the events they appended. */
const run = (...commands: PayoutCommand[]): PayoutEvent[] =>
  commands.reduce<PayoutEvent[]>((events, c) => [...events, ...payoutDecider.decide(c, given(events))], []);
const deposit: PayoutCommand = {
  type: 'RecordDeposit',
  txHash: '0xabc',
  from: SENDER,
  amount: '25000000',
  now,
};
const SWEEP_TX = `0x${'5'.repeat(64)}`;
const forwarded: PayoutCommand = {
  type: 'RecordForwarded',
  transferId: 'tr_1',
  forwardTxHash: SWEEP_TX,
  now,
};

describe('Payout aggregate', () => {
  it('a payout waits for the deposit at the customer address, in the beneficiary currency', () => {
    expect(payoutObject(given(run(create())))).toMatchObject({
      status: 'awaiting_deposit',
      amount: '25000000',
      token: 'USDC',
      chain: 'eip155:8453',
      currency: 'USD',
      deposit_address: ADDRESS,
      fiat_amount: null,
    });
  });

  it.each<CustomerStatus>(['kyc_pending', 'action_required', 'kyc_failed', 'suspended'])(
    'a %s customer is refused with 422 customer_not_active and nothing is appended',
    (status) => {
      const error = errorOf(() => run(create({}, status)));
      expect([error.status, error.type, error.code, error.param]).toEqual([
        422,
        'cannot_process',
        'customer_not_active',
        'customer',
      ]);
    },
  );

  it.each([
    [{ amount: '0' }, 'amount'],
    [{ amount: 25 }, 'amount'],
    [{ chain: 'eip155:1' }, 'chain'],
    [{ token: 'DAI' }, 'token'],
    [{ currency: 'EUR' }, 'currency'],
  ])('%j is refused naming %s', (input, param) => {
    expect(errorOf(() => run(create(input))).param).toBe(param);
  });

  it("a customer whose deposit address is retired (an earlier factory's) is refused 422 deposit_address_retired, after the 400s", () => {
    const retired: PayoutCommand = {
      ...create(),
      context: {
        customer: { id: 'cus_1', status: 'active', depositAddress: ADDRESS, depositAddressRetired: true },
        beneficiary: { id: 'bnf_1', currency: 'USD' },
        tokens: [USDC],
      },
    } as PayoutCommand;
    const error = errorOf(() => run(retired));
    expect([error.status, error.type, error.code, error.param]).toEqual([
      422,
      'cannot_process',
      'deposit_address_retired',
      'customer',
    ]);
    const malformed = { ...retired, input: { ...(retired as { input: object }).input, amount: 'x' } };
    expect(errorOf(() => run(malformed as PayoutCommand)).status).toBe(400);
  });

  it('deposit detected, forwarded, completed with the fiat amount', () => {
    const events = run(create(), deposit, forwarded, { type: 'RecordCompleted', fiatAmount: '2500', now });
    expect(events.map((e) => e.type)).toEqual([
      'PayoutCreated.v1',
      'PayoutDepositDetected.v1',
      'PayoutForwarded.v1',
      'PayoutCompleted.v1',
    ]);
    expect(payoutObject(given(events))).toMatchObject({
      status: 'completed',
      fiat_amount: '2500',
      deposit: { tx_hash: '0xabc', from: SENDER, amount: '25000000' },
    });
  });

  it('the forward records the sweep transaction that moved the deposit into the off-ramp (forward_tx_hash)', () => {
    const events = run(create(), deposit, forwarded);
    expect(events[2]?.data).toMatchObject({ forwardTxHash: SWEEP_TX });
    expect(payoutObject(given(events))).toMatchObject({ status: 'forwarded', forward_tx_hash: SWEEP_TX });
    expect(payoutObject(given(run(create(), deposit)))).toMatchObject({ forward_tx_hash: null });
  });

  it('a forwarded fact recorded before the sweep was wired (no forwardTxHash) reads forward_tx_hash null', () => {
    const old = {
      type: 'PayoutForwarded.v1',
      data: { transferId: 'tr_1', forwardedAt: now.toISOString() },
    } as PayoutEvent;
    expect(payoutObject(given([...run(create(), deposit), old]))).toMatchObject({
      status: 'forwarded',
      forward_tx_hash: null,
    });
  });

  it('a test-helper deposit is marked simulated (no transaction to sweep); a chain deposit is not', () => {
    const [, chain] = run(create(), deposit);
    const [, helper] = run(create(), { ...deposit, simulated: true } as PayoutCommand);
    expect(chain?.data).not.toHaveProperty('simulated');
    expect(helper?.data).toMatchObject({ simulated: true });
  });

  it('a failed payout carries its reason and is refunded to the sender', () => {
    const events = run(
      create(),
      deposit,
      forwarded,
      { type: 'RecordFailed', reason: 'rampoff_withdraw_failed', now },
      {
        type: 'RecordRefunded',
        to: SENDER,
        amount: '25000000',
        reference: 'ref_1',
        now,
      },
    );
    expect(payoutObject(given(events))).toMatchObject({
      status: 'refunded',
      failure_reason: 'rampoff_withdraw_failed',
      refund: { to: SENDER, amount: '25000000', tx_hash: null },
    });
  });

  it('a step out of order is 409; the same step again appends nothing', () => {
    expect(errorOf(() => run(create(), forwarded)).code).toBe('payout_state');
    expect(errorOf(() => run(create(), { type: 'RecordCompleted', fiatAmount: '1', now })).status).toBe(409);
    expect(run(create(), deposit, deposit)).toHaveLength(2);
  });

  it('a funded payout refuses a second, different deposit (409), so it can go to the next payout waiting', () => {
    const other: PayoutCommand = { ...deposit, txHash: '0xdef' } as PayoutCommand;
    expect(errorOf(() => run(create(), deposit, other))).toMatchObject({ status: 409, code: 'payout_state' });
  });

  it('another transfer log of the same transaction is another deposit: a funded payout refuses it (409)', () => {
    const first: PayoutCommand = { ...deposit, logIndex: 3 } as PayoutCommand;
    const second: PayoutCommand = { ...deposit, logIndex: 4 } as PayoutCommand;
    expect(run(create(), first, first)).toHaveLength(2);
    expect(errorOf(() => run(create(), first, second))).toMatchObject({ status: 409, code: 'payout_state' });
    // A fact recorded before the log index was kept still takes its own redelivery as the same deposit.
    expect(run(create(), deposit, second)).toHaveLength(2);
  });

  it('a reorg retracting the deposit before the forward returns the payout to awaiting_deposit; it can be funded again', () => {
    const retract: PayoutCommand = { type: 'RetractDeposit', txHash: '0xabc', now };
    const events = run(create(), deposit, retract);
    expect(events.at(-1)?.type).toBe('PayoutDepositRetracted.v1');
    expect(payoutObject(given(events))).toMatchObject({ status: 'awaiting_deposit', deposit: null });
    expect(run(create(), deposit, retract, deposit).at(-1)?.type).toBe('PayoutDepositDetected.v1');
    // Another transaction's retraction, or the same one twice, changes nothing.
    expect(run(create(), deposit, { ...retract, txHash: '0xdef' } as PayoutCommand)).toHaveLength(2);
    expect(run(create(), deposit, retract, retract)).toHaveLength(3);
  });

  it('a retraction after the forward is refused (409 deposit_already_forwarded) for the caller to flag', () => {
    const retract: PayoutCommand = { type: 'RetractDeposit', txHash: '0xabc', now };
    expect(errorOf(() => run(create(), deposit, forwarded, retract))).toMatchObject({
      status: 409,
      code: 'deposit_already_forwarded',
    });
  });

  describe('the sweep to the off-ramp is recorded before the forward', () => {
    const retract: PayoutCommand = { type: 'RetractDeposit', txHash: '0xabc', now };
    const swept: PayoutCommand = { type: 'RecordSwept', txHash: SWEEP_TX, now };

    it('given a funded payout, when its sweep lands, then PayoutDepositSwept records it and the payout is still deposit_detected', () => {
      const events = run(create(), deposit, swept);
      expect(events.at(-1)).toEqual({
        type: 'PayoutDepositSwept.v1',
        data: { txHash: SWEEP_TX, sweptAt: now.toISOString() },
      });
      expect(payoutObject(given(events))).toMatchObject({
        status: 'deposit_detected',
        forward_tx_hash: null,
      });
      // A retry that finds the same sweep on chain, or a forward already recorded, appends nothing.
      expect(run(create(), deposit, swept, swept)).toHaveLength(3);
      expect(run(create(), deposit, forwarded, swept)).toHaveLength(3);
    });

    it('given a swept payout not forwarded yet, when a reorg retracts its deposit, then it is refused (409 deposit_already_forwarded) for the caller to flag, and the forward still goes', () => {
      expect(errorOf(() => run(create(), deposit, swept, retract))).toMatchObject({
        status: 409,
        code: 'deposit_already_forwarded',
      });
      expect(run(create(), deposit, swept, forwarded).at(-1)?.type).toBe('PayoutForwarded.v1');
    });

    it('given a deposit retracted while the sweep was in flight, when the sweep lands, then it is refused (409 payout_state) for the caller to flag', () => {
      expect(errorOf(() => run(create(), deposit, retract, swept))).toMatchObject({
        status: 409,
        code: 'payout_state',
      });
    });

    it.each(HELD_FAILURE_REASONS)(
      'given a swept payout (its address retired or its sender flagged since), when it is failed %s, then it is refused (409 payout_state): nothing is held',
      (reason) => {
        const failed: PayoutCommand = { type: 'RecordFailed', reason, now };
        expect(errorOf(() => run(create(), deposit, swept, failed))).toMatchObject({
          status: 409,
          code: 'payout_state',
        });
        // Not swept: the held failure is recorded as before.
        expect(run(create(), deposit, failed).at(-1)?.type).toBe('PayoutFailed.v1');
      },
    );

    it('given a swept payout, when its customer is suspended meanwhile, then the recheck holds nothing (the funds are at the off-ramp)', () => {
      const recheck: PayoutCommand = { type: 'RecheckCustomer', customerStatus: 'suspended', now };
      expect(run(create(), deposit, swept, recheck)).toHaveLength(3);
    });
  });

  describe('a sweep signed before it is broadcast', () => {
    const sent: PayoutCommand = { type: 'RecordSweepSent', txHash: SWEEP_TX, nonce: 7, now };

    it('given a detected deposit, when a sweep is signed, then it is recorded once (its hash kept) and the API object is unchanged', () => {
      const before = payoutObject(given(run(create(), deposit)));
      const events = run(create(), deposit, { ...sent, now: new Date(now.getTime() + 1_000) }, sent);
      expect(events.at(-1)).toMatchObject({
        type: 'PayoutSweepSent.v1',
        data: { txHash: SWEEP_TX, nonce: 7 },
      });
      expect(events).toHaveLength(3);
      expect(given(events).sentSweepTxHashes).toEqual([SWEEP_TX]);
      expect(payoutObject(given(events))).toEqual(before);
    });

    it('given a deposit retracted meanwhile, when a sweep is signed, then it is refused (409 payout_state): nothing is broadcast', () => {
      const retract: PayoutCommand = { type: 'RetractDeposit', txHash: '0xabc', now };
      expect(errorOf(() => run(create(), deposit, retract, sent))).toMatchObject({
        status: 409,
        code: 'payout_state',
      });
    });
  });

  describe('a reorg orphaning the sweep with the deposit', () => {
    const swept: PayoutCommand = { type: 'RecordSwept', txHash: SWEEP_TX, now };
    const orphaned: PayoutCommand = { type: 'RecordSweepOrphaned', txHash: SWEEP_TX, now };
    const back: PayoutCommand = { type: 'RecordDepositReincluded', txHash: '0xABC', logIndex: 7, now };
    const RESWEEP_TX = `0x${'6'.repeat(64)}`;
    const reswept: PayoutCommand = { type: 'RecordSwept', txHash: RESWEEP_TX, now };

    it('given a forwarded payout whose sweep was orphaned, when its deposit is back and the sweep redone, then the new sweep is the forward transaction and nothing is orphaned any more', () => {
      const events = run(create(), deposit, swept, forwarded, orphaned, back, reswept);
      expect(events.slice(-3).map((e) => e.type)).toEqual([
        'PayoutSweepOrphaned.v1',
        'PayoutDepositReincluded.v1',
        'PayoutDepositSwept.v1',
      ]);
      const state = given(events);
      expect(state).toMatchObject({
        status: 'forwarded',
        sweepTxHash: RESWEEP_TX,
        orphanedSweepTxHash: null,
        deposit: { txHash: '0xabc', logIndex: 7 },
      });
      expect(payoutObject(state).forward_tx_hash).toBe(RESWEEP_TX);
    });

    it('given a forwarded payout, when its sweep is orphaned and its deposit re-included, then the API object is unchanged (updated_at included)', () => {
      const before = payoutObject(given(run(create(), deposit, swept, forwarded)));
      const later = new Date(now.getTime() + 60_000);
      const events = run(
        create(),
        deposit,
        swept,
        forwarded,
        { ...orphaned, now: later },
        { ...back, now: later },
      );
      expect(events).toHaveLength(6);
      expect(payoutObject(given(events))).toEqual(before);
    });

    it('given an orphaned sweep mined again, when it is found, then the same transaction is recorded again and clears the orphan', () => {
      const events = run(create(), deposit, swept, forwarded, orphaned, swept);
      expect(events.at(-1)).toMatchObject({ type: 'PayoutDepositSwept.v1', data: { txHash: SWEEP_TX } });
      expect(given(events)).toMatchObject({ sweepTxHash: SWEEP_TX, orphanedSweepTxHash: null });
    });

    it('given a payout swept but not forwarded whose sweep is orphaned and deposit back, when it fails deposit_address_retired (the sweep cannot be redone), then it is failed: its funds are at the address again', () => {
      const failed: PayoutCommand = { type: 'RecordFailed', reason: 'deposit_address_retired', now };
      expect(run(create(), deposit, swept, orphaned, back, failed).at(-1)).toMatchObject({
        type: 'PayoutFailed.v1',
        data: { reason: 'deposit_address_retired' },
      });
    });

    it('appends nothing for another sweep, a second retraction, or a re-included deposit while nothing is orphaned', () => {
      const other: PayoutCommand = { type: 'RecordSweepOrphaned', txHash: RESWEEP_TX, now };
      expect(run(create(), deposit, swept, other)).toHaveLength(3);
      expect(run(create(), deposit, swept, orphaned, orphaned)).toHaveLength(4);
      expect(run(create(), deposit, swept, back)).toHaveLength(3);
      expect(
        run(create(), deposit, swept, orphaned, { ...back, txHash: '0xdef' } as PayoutCommand),
      ).toHaveLength(4);
    });
  });

  describe('the customer is rechecked before the off-ramp', () => {
    const recheck = (customerStatus: CustomerStatus): PayoutCommand => ({
      type: 'RecheckCustomer',
      customerStatus,
      now,
    });

    it.each<CustomerStatus>(['suspended', 'kyc_pending', 'action_required', 'kyc_failed'])(
      'given a funded payout, when its customer is now %s, then it fails customer_not_active and its funds are held',
      (status) => {
        const events = run(create(), deposit, recheck(status));
        expect(events.at(-1)).toMatchObject({
          type: 'PayoutFailed.v1',
          data: { reason: 'customer_not_active' },
        });
        expect(payoutObject(given(events))).toMatchObject({
          status: 'failed',
          failure_reason: 'customer_not_active',
        });
        expect(HELD_FAILURE_REASONS).toContain('customer_not_active');
      },
    );

    it('given a funded payout, when its customer is still active, then nothing is appended (it goes on)', () => {
      expect(run(create(), deposit, recheck('active'))).toHaveLength(2);
    });

    it('given a payout already failed for it, when rechecked again (a redelivery), then nothing more is appended', () => {
      expect(run(create(), deposit, recheck('suspended'), recheck('suspended'))).toHaveLength(3);
    });
  });

  describe('a held payout refunded from its deposit address (refund_held)', () => {
    const REFUND_TX = `0x${'7'.repeat(64)}`;
    const failed = (reason: PayoutFailureReason): PayoutCommand => ({ type: 'RecordFailed', reason, now });
    const heldRefunded = (txHash: string | null = REFUND_TX): PayoutCommand => ({
      type: 'RecordHeldRefunded',
      txHash,
      now,
    });

    it("given a customer_not_active payout, its own deposit goes back to the wallet it came from, with the refund's transaction", () => {
      const state = given(run(create(), deposit, failed('customer_not_active')));
      expect(heldRefund(state)).toEqual({ to: SENDER, amount: '25000000' });
      const events = run(create(), deposit, failed('customer_not_active'), heldRefunded());
      expect(events.at(-1)).toEqual({
        type: 'PayoutRefunded.v1',
        data: { to: SENDER, amount: '25000000', txHash: REFUND_TX, refundedAt: now.toISOString() },
      });
      expect(payoutObject(given(events))).toMatchObject({
        status: 'refunded',
        failure_reason: 'customer_not_active',
        refund: { to: SENDER, amount: '25000000', tx_hash: REFUND_TX },
      });
    });

    describe('a deposit minted straight to the address (a bridge relayer sent the minting transaction)', () => {
      const CUSTOMER_WALLET = '0x9999999999999999999999999999999999999999';
      const minted: PayoutCommand = { ...deposit, minted: true } as PayoutCommand;

      it('records the deposit as minted, shown on the payout', () => {
        const events = run(create(), minted);
        expect(events.at(-1)).toMatchObject({
          type: 'PayoutDepositDetected.v1',
          data: { from: SENDER, minted: true },
        });
        expect(payoutObject(given(events)).deposit).toMatchObject({ from: SENDER, minted: true });
      });

      it('is never returned to its minting sender: refund_held without a signed destination is 422 refund_destination_required, nothing appended', () => {
        const history = run(create(), minted, failed('customer_not_active'));
        const error = errorOf(() => heldRefund(given(history)));
        expect([error.status, error.code, error.param]).toEqual([422, 'refund_destination_required', 'to']);
        expect(errorOf(() => payoutDecider.decide(heldRefunded(), given(history))).code).toBe(
          'refund_destination_required',
        );
      });

      it('goes to the destination the merchant signed, recorded on the refund', () => {
        const history = run(create(), minted, failed('customer_not_active'));
        expect(heldRefund(given(history), CUSTOMER_WALLET)).toEqual({
          to: CUSTOMER_WALLET,
          amount: '25000000',
        });
        const events = [
          ...history,
          ...payoutDecider.decide(
            { type: 'RecordHeldRefunded', txHash: REFUND_TX, to: CUSTOMER_WALLET, now },
            given(history),
          ),
        ];
        expect(events.at(-1)).toMatchObject({ type: 'PayoutRefunded.v1', data: { to: CUSTOMER_WALLET } });
      });

      it('a deposit that was not minted takes no other destination (400 refund_destination_fixed)', () => {
        const history = run(create(), deposit, failed('customer_not_active'));
        const error = errorOf(() => heldRefund(given(history), CUSTOMER_WALLET));
        expect([error.status, error.code, error.param]).toEqual([400, 'refund_destination_fixed', 'to']);
        expect(heldRefund(given(history), SENDER)).toEqual({ to: SENDER, amount: '25000000' });
      });

      describe('failed at the off-ramp (its funds there, the off-ramp returning only to the minting sender)', () => {
        const swept: PayoutCommand = { type: 'RecordSwept', txHash: SWEEP_TX, now };
        const later = new Date('2026-06-01T11:00:00.000Z');
        const offRampFailed: PayoutCommand = {
          type: 'RecordFailed',
          reason: 'rampoff_withdraw_failed',
          now: later,
        };

        it('records the refund as withheld (deposit_minted) with the failure, so payout.failed and GET show where the funds wait', () => {
          const events = run(create(), minted, swept, forwarded, offRampFailed);
          expect(events.at(-1)).toEqual({
            type: 'PayoutFailed.v1',
            data: {
              reason: 'rampoff_withdraw_failed',
              failedAt: later.toISOString(),
              refundWithheld: 'deposit_minted',
            },
          });
          expect(payoutObject(given(events))).toMatchObject({
            status: 'failed',
            failure_reason: 'rampoff_withdraw_failed',
            refund: null,
            refund_withheld: { reason: 'deposit_minted', withheld_at: later.toISOString() },
          });
        });

        it('refund_held is 409 payout_not_refundable naming the operator: the funds are not at the deposit address', () => {
          const state = given(run(create(), minted, swept, forwarded, offRampFailed));
          const error = errorOf(() => heldRefund(state, CUSTOMER_WALLET));
          expect([error.status, error.code]).toEqual([409, 'payout_not_refundable']);
          expect(error.message).toContain('the operator returns them');
        });

        it('a deposit that was not minted, or a minted one failed for a held reason, has no refund withheld', () => {
          const plain = run(create(), deposit, swept, forwarded, offRampFailed);
          expect(plain.at(-1)?.data).not.toHaveProperty('refundWithheld');
          expect(payoutObject(given(plain)).refund_withheld).toBeNull();
          const held = run(create(), minted, failed('customer_not_active'));
          expect(held.at(-1)?.data).not.toHaveProperty('refundWithheld');
          expect(payoutObject(given(held)).refund_withheld).toBeNull();
        });

        it('a failure recorded before the field (no refundWithheld) reads as none withheld', () => {
          const events = run(create(), minted, swept, forwarded, offRampFailed).map((e) =>
            e.type === 'PayoutFailed.v1'
              ? { ...e, data: { reason: e.data.reason, failedAt: e.data.failedAt } }
              : e,
          );
          expect(payoutObject(given(events)).refund_withheld).toBeNull();
        });

        describe("the operator records the off-ramp's return (withheld-refund-returns)", () => {
          const RETURN_TX = `0x${'7'.repeat(64)}`;
          const returnedAt = new Date('2026-06-02T09:00:00.000Z');
          const returned: PayoutCommand = {
            type: 'RecordWithheldRefundReturned',
            to: CUSTOMER_WALLET,
            txHash: RETURN_TX,
            reference: 'rfd_123',
            now: returnedAt,
          };

          it('records PayoutRefunded of the deposit amount to the confirmed wallet: refunded, refund_withheld cleared, payout.refunded', () => {
            const events = run(create(), minted, swept, forwarded, offRampFailed, returned);
            expect(events.at(-1)).toEqual({
              type: 'PayoutRefunded.v1',
              data: {
                to: CUSTOMER_WALLET,
                amount: '25000000',
                reference: 'rfd_123',
                txHash: RETURN_TX,
                refundedAt: returnedAt.toISOString(),
              },
            });
            expect(PAYOUT_WEBHOOK_BY_EVENT['PayoutRefunded.v1']).toBe('payout.refunded');
            expect(payoutObject(given(events))).toMatchObject({
              status: 'refunded',
              refund: { to: CUSTOMER_WALLET, amount: '25000000', tx_hash: RETURN_TX },
              refund_withheld: null,
            });
          });

          it('records the return of a refund the flow withheld under a failure recorded before the field (no refundWithheld on the fact)', () => {
            // The flow withholds such a refund all the same (refundWithheldReason) and alerts the operator, whose
            // runbook ends here: refused, the payout could never close.
            const old = run(create(), minted, swept, forwarded, offRampFailed).map((e) =>
              e.type === 'PayoutFailed.v1'
                ? { ...e, data: { reason: e.data.reason, failedAt: e.data.failedAt } }
                : e,
            );
            expect(withheldRefundReturn(given(old))).toEqual({ amount: '25000000' });
            const events = [...old, ...decidePayout(returned, given(old))];
            expect(events.at(-1)).toMatchObject({
              type: 'PayoutRefunded.v1',
              data: { to: CUSTOMER_WALLET, amount: '25000000', txHash: RETURN_TX },
            });
            expect(payoutObject(given(events))).toMatchObject({ status: 'refunded', refund_withheld: null });
          });

          it('is 409 payout_already_refunded once recorded, 409 refund_not_withheld for a payout whose refund is not withheld', () => {
            const refunded = given(run(create(), minted, swept, forwarded, offRampFailed, returned));
            const again = errorOf(() => decidePayout(returned, refunded));
            expect([again.status, again.code]).toEqual([409, 'payout_already_refunded']);
            for (const state of [
              given(run(create(), deposit, swept, forwarded, offRampFailed)),
              given(run(create(), minted, swept, forwarded)),
              given(run(create(), minted, failed('customer_not_active'))),
            ]) {
              const error = errorOf(() => decidePayout(returned, state));
              expect([error.status, error.code]).toEqual([409, 'refund_not_withheld']);
            }
            expect(errorOf(() => decidePayout(returned, initialPayoutState())).status).toBe(404);
          });

          it('takes to and the off-ramp proof (tx_hash or reference), refusing bad input with the field named', () => {
            expect(parseWithheldRefundReturnInput({ to: CUSTOMER_WALLET, reference: 'rfd_1' })).toEqual({
              to: CUSTOMER_WALLET,
              reference: 'rfd_1',
            });
            const refusal = (input: unknown) => {
              const e = errorOf(() => parseWithheldRefundReturnInput(input));
              return [e.status, e.param, e.code];
            };
            expect(refusal({ tx_hash: RETURN_TX })).toEqual([400, 'to', 'parameter_missing']);
            expect(refusal({ to: `0x${'0'.repeat(40)}`, tx_hash: RETURN_TX })).toEqual([
              400,
              'to',
              'invalid_address',
            ]);
            expect(refusal({ to: 'alice', tx_hash: RETURN_TX })).toEqual([400, 'to', 'invalid_address']);
            expect(refusal({ to: CUSTOMER_WALLET, tx_hash: '0x12' })).toEqual([
              400,
              'tx_hash',
              'invalid_tx_hash',
            ]);
            expect(refusal({ to: CUSTOMER_WALLET, reference: 'a b' })).toEqual([
              400,
              'reference',
              'parameter_invalid',
            ]);
            expect(refusal({ to: CUSTOMER_WALLET })).toEqual([400, 'tx_hash', 'parameter_missing']);
            expect(refusal({ to: CUSTOMER_WALLET, reference: 'r', amount: '1' })).toEqual([
              400,
              'amount',
              'unknown_parameter',
            ]);
            expect(refusal([])).toEqual([400, undefined, 'invalid_json']);
          });
        });
      });

      it('to is parsed as a non-zero address (400 invalid_address)', () => {
        const base = { deadline: 1, signature: `0x${'1'.repeat(130)}` };
        expect(parseRefundHeldInput({ ...base, to: CUSTOMER_WALLET }).to).toBe(CUSTOMER_WALLET);
        for (const to of ['0x12', `0x${'0'.repeat(40)}`, 7])
          expect(errorOf(() => parseRefundHeldInput({ ...base, to })).code).toBe('invalid_address');
      });

      it('a mixed-case to with a wrong EIP-55 checksum is 400 invalid_address (a typo; screening would throw on it)', () => {
        const badChecksum = `0x${'aB'.repeat(20)}`;
        const base = { deadline: 1, signature: `0x${'1'.repeat(130)}` };
        const held = errorOf(() => parseRefundHeldInput({ ...base, to: badChecksum }));
        expect([held.status, held.param, held.code]).toEqual([400, 'to', 'invalid_address']);
        const returned = errorOf(() =>
          parseWithheldRefundReturnInput({ to: badChecksum, tx_hash: `0x${'ab'.repeat(32)}` }),
        );
        expect([returned.status, returned.param, returned.code]).toEqual([400, 'to', 'invalid_address']);
        // All lower case is taken, and answered checksummed.
        expect(parseRefundHeldInput({ ...base, to: badChecksum.toLowerCase() }).to).toBe(
          getAddress(badChecksum.toLowerCase()),
        );
      });
    });

    it('the same refund recorded again (a retry that found its transaction) appends nothing; another is 409', () => {
      const events = run(create(), deposit, failed('customer_not_active'), heldRefunded(), heldRefunded());
      expect(events).toHaveLength(4);
      const error = errorOf(() =>
        run(
          create(),
          deposit,
          failed('customer_not_active'),
          heldRefunded(),
          heldRefunded(`0x${'8'.repeat(64)}`),
        ),
      );
      expect([error.status, error.code]).toEqual([409, 'payout_already_refunded']);
    });

    it.each<[PayoutFailureReason, boolean, number, string]>([
      ['sender_flagged', false, 422, 'sender_flagged'],
      ['deposit_address_retired', false, 409, 'deposit_address_retired'],
      ['rampoff_withdraw_failed', true, 409, 'payout_not_refundable'],
      ['provider_rejected', true, 409, 'payout_not_refundable'],
    ])(
      'given a payout failed %s (after the forward: %s), it is refused (%i %s) and nothing is appended',
      (reason, afterForward, status, code) => {
        const history = afterForward
          ? run(create(), deposit, forwarded, failed(reason))
          : run(create(), deposit, failed(reason));
        const error = errorOf(() => heldRefund(given(history)));
        expect([error.status, error.code]).toEqual([status, code]);
        expect(errorOf(() => payoutDecider.decide(heldRefunded(), given(history))).code).toBe(code);
      },
    );

    it.each([
      ['awaiting_deposit', () => run(create())],
      ['deposit_detected', () => run(create(), deposit)],
      ['forwarded', () => run(create(), deposit, forwarded)],
    ])('a %s payout is 409 payout_not_refundable', (_status, history) => {
      const error = errorOf(() => heldRefund(given(history())));
      expect([error.status, error.code]).toEqual([409, 'payout_not_refundable']);
    });

    it.each(HELD_FAILURE_REASONS)(
      'given a payout failed %s before any sweep, when a reorg retracts its deposit, then the retraction is recorded: still failed, no deposit, refund_held 409 deposit_retracted',
      (reason) => {
        const retract: PayoutCommand = { type: 'RetractDeposit', txHash: '0xabc', now };
        const events = run(create(), deposit, failed(reason), retract);
        expect(events.at(-1)?.type).toBe('PayoutDepositRetracted.v1');
        expect(payoutObject(given(events))).toMatchObject({
          status: 'failed',
          failure_reason: reason,
          deposit: null,
        });
        const error = errorOf(() => heldRefund(given(events)));
        expect([error.status, error.code]).toEqual([409, 'deposit_retracted']);
        expect(errorOf(() => payoutDecider.decide(heldRefunded(), given(events))).code).toBe(
          'deposit_retracted',
        );
        // It takes no other deposit: failed is terminal.
        expect(errorOf(() => run(create(), deposit, failed(reason), retract, deposit)).code).toBe(
          'payout_state',
        );
      },
    );

    it('a payout failed at the off-ramp (after the forward) still refuses a retraction (409 deposit_already_forwarded)', () => {
      const retract: PayoutCommand = { type: 'RetractDeposit', txHash: '0xabc', now };
      expect(
        errorOf(() => run(create(), deposit, forwarded, failed('provider_rejected'), retract)).code,
      ).toBe('deposit_already_forwarded');
    });

    it('a retired deposit address is a held failure: the off-ramp never refunds it', () => {
      expect(HELD_FAILURE_REASONS).toEqual(
        expect.arrayContaining(['sender_flagged', 'customer_not_active', 'deposit_address_retired']),
      );
    });

    it('an off-ramp refund recorded before the held refund existed (reference, no txHash) reads tx_hash null', () => {
      const state = given([
        ...run(create(), deposit, forwarded, failed('rampoff_order_failed')),
        {
          type: 'PayoutRefunded.v1',
          data: { to: SENDER, amount: '25000000', reference: 'ref_1', refundedAt: now.toISOString() },
        },
      ]);
      expect(state.refund).toEqual({
        to: SENDER,
        amount: '25000000',
        reference: 'ref_1',
        txHash: null,
        refundedAt: now.toISOString(),
      });
    });
  });

  describe('refund_held input', () => {
    const signature = `0x${'1'.repeat(130)}`;
    const MAX_UINT256 = (2n ** 256n - 1n).toString();

    it('takes a deadline up to uint256 max (number or decimal string)', () => {
      expect(parseRefundHeldInput({ deadline: 1_800_000_000, signature }).deadline).toBe(1_800_000_000n);
      expect(parseRefundHeldInput({ deadline: MAX_UINT256, signature }).deadline).toBe(BigInt(MAX_UINT256));
    });

    it.each([(2n ** 256n).toString(), '9'.repeat(78), '1' + '0'.repeat(78), '01', '-1', '1.5'])(
      'a deadline %s (not a uint256) is 400 invalid_deadline, param deadline',
      (deadline) => {
        const error = errorOf(() => parseRefundHeldInput({ deadline, signature }));
        expect([error.status, error.code, error.param]).toEqual([400, 'invalid_deadline', 'deadline']);
      },
    );

    it('tells a deadline of 79 digits it is above uint256, and a present malformed one what arrived', () => {
      expect(errorOf(() => parseRefundHeldInput({ deadline: '9'.repeat(79), signature })).message).toBe(
        `deadline must be at most 2^256 - 1 (${MAX_UINT256}), the largest uint256.`,
      );
      expect(errorOf(() => parseRefundHeldInput({ deadline: 'soon', signature })).message).toMatch(
        /^deadline must be the unix seconds .*; received "soon"\.$/,
      );
      expect(errorOf(() => parseRefundHeldInput({ signature })).message).toMatch(/^deadline is required: /);
    });
  });
});
