import type { BusMessage, EventBus } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import type { SanctionsScreening } from '@stablepay/evm';
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

function payoutHistory(): unknown[] {
  const commands: PayoutCommand[] = [
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
  ];
  const events = commands.reduce<PayoutEvent[]>((history, command) => {
    const state = history.reduce<PayoutState>(payoutDecider.evolve, payoutDecider.initialState());
    return [...history, ...payoutDecider.decide(command, state)];
  }, []);
  return events;
}

function flowWith(sweptAlready: boolean, retired = false) {
  const appended: PayoutCommand[] = [];
  const screened: string[][] = [];
  const store = {
    readStream: (id: string) => Promise.resolve(id === 'payout-po_1' ? payoutHistory() : []),
  } as unknown as EventStore;
  const aggregates = {
    now: () => now,
    payout: (_id: string, _owner: unknown, command: PayoutCommand) => {
      appended.push(command);
      return Promise.resolve({ id: 'po_1', revision: 3, changed: true });
    },
  } as unknown as PayoutsAggregates;
  const offRamp = { submit: () => Promise.resolve({ transferId: 'tr_1' }) } as unknown as OffRampProvider;
  const screening: SanctionsScreening = {
    screen: (addresses) => {
      screened.push([...addresses]);
      return Promise.resolve({ kind: 'match', address: SENDER });
    },
  };
  const accounts = { account: () => Promise.resolve({ kind: 'iban', iban: 'DE89370400440532013000' }) };
  const swept: string[] = [];
  const sweeper = {
    retired: () => retired,
    swept: () => {
      swept.push('asked');
      return Promise.resolve(sweptAlready);
    },
    sweep: () => Promise.resolve(SWEEP_TX),
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
  return { flow, message, appended, screened, swept };
}

describe('PayoutFlowConsumer forward step', () => {
  it('forwards a payout whose own sweep already landed, without screening it again (a match now holds nothing)', async () => {
    const { flow, message, appended, screened } = flowWith(true);
    await flow.handle(message);
    expect(screened).toEqual([]);
    expect(appended).toEqual([{ type: 'RecordForwarded', transferId: 'tr_1', forwardTxHash: SWEEP_TX, now }]);
  });

  it('screens a payout not swept yet: a match fails it sender_flagged and nothing moves', async () => {
    const { flow, message, appended, screened } = flowWith(false);
    await flow.handle(message);
    expect(screened).toEqual([[SENDER]]);
    expect(appended).toEqual([{ type: 'RecordFailed', reason: 'sender_flagged', now }]);
  });

  it("fails a payout whose deposit address this deployment cannot sweep (an older factory's) deposit_address_retired, moving nothing", async () => {
    const { flow, message, appended, screened, swept } = flowWith(false, true);
    await flow.handle(message);
    expect(appended).toEqual([{ type: 'RecordFailed', reason: 'deposit_address_retired', now }]);
    expect(screened).toEqual([]);
    expect(swept).toEqual([]);
  });
});
