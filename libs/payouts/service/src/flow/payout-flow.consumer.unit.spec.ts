import type { BusMessage, EventBus } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import { SCREENING_OUTAGE_GRACE_MS, type SanctionsScreening, type ScreeningResult } from '@stablepay/evm';
import {
  type PayoutCommand,
  payoutDecider,
  type PayoutEvent,
  type PayoutState,
} from '@stablepay/payouts-domain';
import type { PayoutsAggregates } from '../aggregates';
import type { BankAccountVault } from '../bank-accounts';
import type { KycProvider } from '../providers/kyc-provider';
import type { OffRampProvider } from '../providers/off-ramp';
import { register } from 'prom-client';
import { PayoutFlowConsumer } from './payout-flow.consumer';
import type { PayoutSweeper } from './payout-sweep';

/**
 * The forward step retried after its sweep landed (the off-ramp refused the transfer, or the answer was lost): the
 * funds are at the off-ramp already, so a screening or a customer status that changed since cannot hold them any
 * more. The payout is forwarded with its sweep, not failed as "held" while nothing is held.
 */
const now = new Date('2026-11-24T06:00:00.000Z');
const SENDER = '0x2222222222222222222222222222222222222222';
const SWEEP_TX = `0x${'5'.repeat(64)}`;
const USDC = { chain: 'eip155:8453', symbol: 'USDC', asset: 'eip155:8453/erc20:0xusdc', decimals: 6 };

function decided(commands: readonly PayoutCommand[], history: PayoutEvent[] = []): PayoutEvent[] {
  return commands.reduce<PayoutEvent[]>((events, command) => {
    const state = events.reduce<PayoutState>(payoutDecider.evolve, payoutDecider.initialState());
    return [...events, ...payoutDecider.decide(command, state)];
  }, history);
}

function payoutHistory(): PayoutEvent[] {
  return decided([
    {
      type: 'CreatePayout',
      id: 'po_1',
      input: {
        customer: 'cus_1',
        beneficiary: 'bnf_1',
        amount: '25000000',
        chain: USDC.chain,
        token: 'usdc',
      },
      context: {
        customer: {
          id: 'cus_1',
          status: 'active',
          depositAddress: '0x1111111111111111111111111111111111111111',
        },
        beneficiary: { id: 'bnf_1', currency: 'USD' },
        tokens: [USDC],
      },
      now,
    },
    { type: 'RecordDeposit', txHash: '0xabc', from: SENDER, amount: '25000000', now },
  ]);
}

/**
 * The flow over a payout stream kept here (appends run the decider, as PayoutsAggregates does). `duringSweep` runs
 * while the sweep's transaction is in flight (a reorg's retraction landing then).
 */
function flowWith(
  sweptAlready: boolean,
  options: {
    history?: PayoutEvent[];
    duringSweep?: (events: PayoutEvent[]) => PayoutEvent[];
    retired?: boolean;
    screened?: ScreeningResult;
    clock?: () => Date;
    /** What the chain shows of an orphaned sweep on the new fork (PayoutSweeper.sweptAgain). */
    sweptAgain?: string | null;
  } = {},
) {
  let events = options.history ?? payoutHistory();
  const calls: string[] = [];
  const appended: PayoutCommand[] = [];
  const screened: string[][] = [];
  const store = {
    readStream: (id: string) => Promise.resolve(id === 'payout-po_1' ? events : []),
  } as unknown as EventStore;
  const aggregates = {
    now: options.clock ?? (() => now),
    payout: (_id: string, _owner: unknown, command: PayoutCommand) => {
      calls.push(command.type);
      const before = events.length;
      events = decided([command], events);
      appended.push(command);
      return Promise.resolve({ id: 'po_1', revision: events.length - 1, changed: events.length > before });
    },
  } as unknown as PayoutsAggregates;
  const offRamp = {
    submit: () => {
      calls.push('submit');
      return Promise.resolve({ transferId: 'tr_1' });
    },
    status: () => {
      calls.push('status');
      return Promise.resolve({ state: 'failed', reason: 'rampoff_withdraw_failed' });
    },
    refund: () => {
      calls.push('refund');
      return Promise.resolve({ reference: 'rf_1' });
    },
  } as unknown as OffRampProvider;
  const screening: SanctionsScreening = {
    screen: (addresses) => {
      screened.push([...addresses]);
      return Promise.resolve(options.screened ?? { kind: 'match', address: SENDER });
    },
  };
  const accounts = { account: () => Promise.resolve({ kind: 'iban', iban: 'DE89370400440532013000' }) };
  const sweeper = {
    retired: () => options.retired ?? false,
    swept: () => {
      calls.push('swept?');
      return Promise.resolve(sweptAlready);
    },
    sweptAgain: () => {
      calls.push('sweptAgain?');
      return Promise.resolve(options.sweptAgain ?? null);
    },
    sweep: () => {
      calls.push('sweep');
      if (options.duringSweep) events = options.duringSweep(events);
      return Promise.resolve(SWEEP_TX);
    },
  } as unknown as PayoutSweeper;
  const flow = new PayoutFlowConsumer(
    {} as EventBus,
    store,
    aggregates,
    offRamp,
    {} as KycProvider,
    screening,
    accounts as unknown as BankAccountVault,
    sweeper,
  );
  const message = {
    id: 'evt_2',
    key: 'payout-po_1',
    type: 'PayoutDepositDetected.v1',
    metadata: { merchantId: 'mer_1', mode: 'test' },
  } as unknown as BusMessage;
  const orphanedMessage = { ...message, id: 'evt_4', type: 'PayoutSweepOrphaned.v1' } as BusMessage;
  const reincludedMessage = { ...message, id: 'evt_6', type: 'PayoutDepositReincluded.v1' } as BusMessage;
  const failedMessage = { ...message, id: 'evt_5', type: 'PayoutFailed.v1' } as BusMessage;
  const forwardedMessage = { ...message, id: 'evt_3', type: 'PayoutForwarded.v1' } as BusMessage;
  return {
    flow,
    message,
    orphanedMessage,
    reincludedMessage,
    failedMessage,
    forwardedMessage,
    appended,
    screened,
    calls,
    events: () => events,
  };
}

const sweepUnresolved = async (): Promise<number> =>
  (await register.getSingleMetric('stablepay_payout_sweep_unresolved_total')?.get())?.values.find(
    (v) => v.labels.chain === USDC.chain && v.labels.reason === 'deposit_address_retired',
  )?.value ?? 0;
const refundWithheld = async (): Promise<number> =>
  (await register.getSingleMetric('stablepay_payout_refund_withheld_total')?.get())?.values.find(
    (v) => v.labels.chain === USDC.chain && v.labels.reason === 'deposit_minted',
  )?.value ?? 0;

const retractedAfterForward = async (): Promise<number> =>
  (
    await register.getSingleMetric('stablepay_payout_deposit_retracted_after_forward_total')?.get()
  )?.values.find((v) => v.labels.chain === USDC.chain)?.value ?? 0;

describe('PayoutFlowConsumer forward step', () => {
  it('forwards a payout whose own sweep already landed, without screening it again (a match now holds nothing)', async () => {
    const { flow, message, appended, screened } = flowWith(true);
    await flow.handle(message);
    expect(screened).toEqual([]);
    expect(appended).toEqual([
      { type: 'RecordSwept', txHash: SWEEP_TX, now },
      { type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now },
    ]);
  });

  it('screens a payout not swept yet: a match fails it sender_flagged and nothing moves', async () => {
    const { flow, message, appended, screened } = flowWith(false);
    await flow.handle(message);
    expect(screened).toEqual([[SENDER]]);
    expect(appended).toEqual([{ type: 'RecordFailed', reason: 'sender_flagged', now }]);
  });

  it("fails a payout whose deposit address this deployment cannot sweep (an older factory's) deposit_address_retired, moving nothing", async () => {
    const { flow, message, appended, screened, calls } = flowWith(false, { retired: true });
    await flow.handle(message);
    expect(appended).toEqual([{ type: 'RecordFailed', reason: 'deposit_address_retired', now }]);
    expect(screened).toEqual([]);
    expect(calls.filter((c) => c === 'sweep')).toEqual([]);
  });

  it('forwards a payout whose sweep was recorded before its address was retired (off-ramp rotated), not failing it held', async () => {
    const history = decided([{ type: 'RecordSwept', txHash: SWEEP_TX, now }], payoutHistory());
    const { flow, message, appended, screened, calls } = flowWith(false, { history, retired: true });
    await flow.handle(message);
    expect(screened).toEqual([]);
    expect(calls).not.toContain('sweep');
    expect(appended).toEqual([{ type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now }]);
  });

  it('forwards a payout whose own sweep is on chain though its address is retired now, not failing it held', async () => {
    const { flow, message, appended } = flowWith(true, { retired: true });
    await flow.handle(message);
    expect(appended.map((c) => c.type)).toEqual(['RecordSwept', 'RecordForwarded']);
  });

  it('records the sweep (PayoutDepositSwept) as soon as it lands, before the off-ramp is asked', async () => {
    const { flow, message, calls, events } = flowWith(true);
    await flow.handle(message);
    expect(calls).toEqual(['swept?', 'sweep', 'RecordSwept', 'submit', 'RecordForwarded']);
    expect(events().map((e) => e.type)).toEqual([
      'PayoutCreated.v1',
      'PayoutDepositDetected.v1',
      'PayoutDepositSwept.v1',
      'PayoutForwarded.v1',
    ]);
  });

  it('a retry of a payout whose sweep is recorded forwards it with that sweep, without asking the chain or sweeping again', async () => {
    const history = decided([{ type: 'RecordSwept', txHash: SWEEP_TX, now }], payoutHistory());
    const { flow, message, calls, appended } = flowWith(false, { history });
    await flow.handle(message);
    expect(calls).toEqual(['submit', 'RecordForwarded']);
    expect(appended).toEqual([{ type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now }]);
  });

  it('a deposit retracted while its sweep was in flight is counted as a retraction after the forward, and the off-ramp is not asked', async () => {
    const before = await retractedAfterForward();
    const { flow, message, calls, events } = flowWith(true, {
      duringSweep: (history) => decided([{ type: 'RetractDeposit', txHash: '0xabc', now }], history),
    });
    await flow.handle(message);
    expect(calls).not.toContain('submit');
    expect(events().at(-1)?.type).toBe('PayoutDepositRetracted.v1');
    expect(await retractedAfterForward()).toBe(before + 1);
  });

  it('an unreachable screening is retried as an outage (never parked) for SCREENING_OUTAGE_GRACE_MS, then parked; nothing is appended or swept', async () => {
    let clock = now;
    const { flow, message, calls } = flowWith(false, {
      screened: { kind: 'unreachable' },
      clock: () => clock,
    });
    await expect(flow.handle(message)).rejects.toMatchObject({ retryable: true });
    clock = new Date(now.getTime() + SCREENING_OUTAGE_GRACE_MS - 1);
    await expect(flow.handle(message)).rejects.toMatchObject({ retryable: true });
    clock = new Date(now.getTime() + SCREENING_OUTAGE_GRACE_MS);
    await expect(flow.handle(message)).rejects.toMatchObject({ retryable: false });
    expect(calls).toEqual(['swept?', 'swept?', 'swept?']);
  });

  describe('a recorded sweep a reorg orphaned before the off-ramp was asked', () => {
    const orphaned = (): PayoutEvent[] =>
      decided(
        [
          { type: 'RecordSwept', txHash: SWEEP_TX, now },
          { type: 'RecordSweepOrphaned', txHash: SWEEP_TX, now },
        ],
        payoutHistory(),
      );

    it('the forward step does not ask the off-ramp: the funds are not known to be there on the new fork', async () => {
      const { flow, message, calls, appended } = flowWith(false, { history: orphaned() });
      await flow.handle(message);
      expect(calls).not.toContain('submit');
      expect(appended).toEqual([]);
    });

    it('the sweep not found on the new fork leaves the payout unforwarded', async () => {
      const { flow, orphanedMessage, calls, appended } = flowWith(false, { history: orphaned() });
      await flow.handle(orphanedMessage);
      expect(calls).toEqual(['sweptAgain?']);
      expect(appended).toEqual([]);
    });

    it('the sweep found on the new fork is recorded, then the payout goes on to the off-ramp with it', async () => {
      const { flow, message, orphanedMessage, calls, appended } = flowWith(false, {
        history: orphaned(),
        sweptAgain: SWEEP_TX,
      });
      await flow.handle(message);
      await flow.handle(orphanedMessage);
      expect(calls).toEqual(['sweptAgain?', 'RecordSwept', 'submit', 'RecordForwarded']);
      expect(appended).toEqual([
        { type: 'RecordSwept', txHash: SWEEP_TX, now },
        { type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now },
      ]);
    });

    it('a retry of that step after a crash between the record and the off-ramp still forwards it', async () => {
      const history = decided([{ type: 'RecordSwept', txHash: SWEEP_TX, now }], orphaned());
      const { flow, orphanedMessage, calls, appended } = flowWith(false, { history });
      await flow.handle(orphanedMessage);
      expect(calls).toEqual(['submit', 'RecordForwarded']);
      expect(appended).toEqual([
        { type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now },
      ]);
    });
  });

  describe('an orphaned sweep whose deposit is back at an address retired since (off-ramp rotated)', () => {
    const orphanedBack = (forwarded: boolean): PayoutEvent[] =>
      decided(
        [
          { type: 'RecordSwept', txHash: SWEEP_TX, now },
          ...(forwarded
            ? [{ type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now } as const]
            : []),
          { type: 'RecordSweepOrphaned', txHash: SWEEP_TX, now },
          { type: 'RecordDepositReincluded', txHash: '0xabc', logIndex: 3, now },
        ],
        payoutHistory(),
      );

    it('is not swept again (refused for ever): a payout not forwarded yet fails deposit_address_retired, counted for the operator', async () => {
      const before = await sweepUnresolved();
      const { flow, reincludedMessage, calls, appended } = flowWith(false, {
        history: orphanedBack(false),
        retired: true,
      });
      await flow.handle(reincludedMessage);
      expect(calls).not.toContain('sweep');
      expect(calls).not.toContain('submit');
      expect(appended).toEqual([{ type: 'RecordFailed', reason: 'deposit_address_retired', now }]);
      expect(await sweepUnresolved()).toBe(before + 1);
    });

    it('a forwarded payout keeps its state, the step ends, and the operator is told', async () => {
      const before = await sweepUnresolved();
      const { flow, reincludedMessage, calls, appended } = flowWith(false, {
        history: orphanedBack(true),
        retired: true,
      });
      await flow.handle(reincludedMessage);
      expect(calls).toEqual(['sweptAgain?']);
      expect(appended).toEqual([]);
      expect(await sweepUnresolved()).toBe(before + 1);
    });
  });

  describe('a forwarded payout whose sweep a reorg orphaned', () => {
    const forwardedOrphaned = (): PayoutEvent[] =>
      decided(
        [
          { type: 'RecordSwept', txHash: SWEEP_TX, now },
          { type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now },
          { type: 'RecordSweepOrphaned', txHash: SWEEP_TX, now },
        ],
        payoutHistory(),
      );

    it("records none of the off-ramp's reports while the sweep is orphaned (the step ends, the payout stays forwarded)", async () => {
      const { flow, forwardedMessage, calls, appended } = flowWith(false, { history: forwardedOrphaned() });
      await flow.handle(forwardedMessage);
      expect(calls).toEqual([]);
      expect(appended).toEqual([]);
    });

    it('records its report once the sweep is found on the new fork', async () => {
      const { flow, orphanedMessage, calls, appended } = flowWith(false, {
        history: forwardedOrphaned(),
        sweptAgain: SWEEP_TX,
      });
      await flow.handle(orphanedMessage);
      expect(calls).toEqual(['sweptAgain?', 'RecordSwept', 'status', 'RecordFailed']);
      expect(appended.at(-1)).toEqual({ type: 'RecordFailed', reason: 'rampoff_withdraw_failed', now });
    });
  });

  describe('a payout failed at the off-ramp whose deposit was minted to the address (a bridge relayer sent the mint)', () => {
    const forwardedOf = (minted: boolean): PayoutEvent[] =>
      decided(
        [
          { type: 'RecordSwept', txHash: SWEEP_TX, now },
          { type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now },
        ],
        payoutHistory().map((e) =>
          e.type === 'PayoutDepositDetected.v1' && minted
            ? { ...e, data: { ...e.data, minted: true as const } }
            : e,
        ),
      );
    const failedAtOffRamp = (minted: boolean): PayoutEvent[] =>
      decided([{ type: 'RecordFailed', reason: 'rampoff_withdraw_failed', now }], forwardedOf(minted));

    it('is not refunded by the off-ramp to its minting sender: nothing is asked or appended, the withheld refund counted for the operator when the failure is recorded', async () => {
      const { flow, forwardedMessage, failedMessage, calls, appended, events } = flowWith(false, {
        history: forwardedOf(true),
      });
      const before = await refundWithheld();
      await flow.handle(forwardedMessage);
      expect(events().at(-1)).toMatchObject({
        type: 'PayoutFailed.v1',
        data: { refundWithheld: 'deposit_minted' },
      });
      expect(await refundWithheld()).toBe(before + 1);
      await flow.handle(failedMessage);
      expect(calls).not.toContain('refund');
      expect(appended.map((c) => c.type)).toEqual(['RecordFailed']);
      expect(await refundWithheld()).toBe(before + 1);
    });

    it('counts the withheld refund once per failure: redelivered steps (the report, the failure) append nothing and count nothing', async () => {
      const { flow, forwardedMessage, failedMessage, appended } = flowWith(false, {
        history: forwardedOf(true),
      });
      const before = await refundWithheld();
      for (const message of [forwardedMessage, failedMessage, forwardedMessage, failedMessage, failedMessage])
        await flow.handle(message);
      expect(appended.map((c) => c.type)).toEqual(['RecordFailed']);
      expect(await refundWithheld()).toBe(before + 1);
    });

    it('a failure recorded before refundWithheld was kept is still withheld and counted by the refund step', async () => {
      const history = failedAtOffRamp(true).map((e) =>
        e.type === 'PayoutFailed.v1'
          ? { ...e, data: { reason: e.data.reason, failedAt: e.data.failedAt } }
          : e,
      );
      const { flow, failedMessage, calls, appended } = flowWith(false, { history });
      const before = await refundWithheld();
      await flow.handle(failedMessage);
      expect(calls).not.toContain('refund');
      expect(appended).toEqual([]);
      expect(await refundWithheld()).toBe(before + 1);
    });

    it('a deposit that was not minted is refunded by the off-ramp to its sender', async () => {
      const { flow, failedMessage, calls } = flowWith(false, { history: failedAtOffRamp(false) });
      await flow.handle(failedMessage);
      expect(calls).toEqual(['refund', 'RecordRefunded']);
    });
  });

  describe('a payout failed at the off-ramp whose sweep a reorg orphaned', () => {
    const failedOrphaned = (): PayoutEvent[] =>
      decided(
        [
          { type: 'RecordSwept', txHash: SWEEP_TX, now },
          { type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now },
          { type: 'RecordFailed', reason: 'rampoff_withdraw_failed', now },
          { type: 'RecordSweepOrphaned', txHash: SWEEP_TX, now },
        ],
        payoutHistory(),
      );
    const refunded = {
      type: 'RecordRefunded',
      to: SENDER,
      amount: '25000000',
      reference: 'rf_1',
      now,
    };

    it('is not refunded by the off-ramp while the sweep is orphaned: it may hold nothing of it on the new fork', async () => {
      const { flow, failedMessage, calls, appended } = flowWith(false, { history: failedOrphaned() });
      await flow.handle(failedMessage);
      expect(calls).not.toContain('refund');
      expect(appended).toEqual([]);
    });

    it('is refunded once its sweep is found on the new fork', async () => {
      const { flow, failedMessage, orphanedMessage, calls, appended } = flowWith(false, {
        history: failedOrphaned(),
        sweptAgain: SWEEP_TX,
      });
      await flow.handle(failedMessage);
      await flow.handle(orphanedMessage);
      expect(calls).toEqual(['sweptAgain?', 'RecordSwept', 'refund', 'RecordRefunded']);
      expect(appended).toEqual([{ type: 'RecordSwept', txHash: SWEEP_TX, now }, refunded]);
    });
  });
});
