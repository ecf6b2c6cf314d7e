import { Interface, Wallet, getAddress, id } from 'ethers';
import { PaymentDepositAbi } from '@stablepay/contracts';
import { PAYMENT_DEPOSIT_EVENT_OBSERVED } from '@stablepay/indexer-domain';
import type { ChainLog } from './chain-rpc';
import { decodeContractEvent } from './log-decoder';

const deposit = new Interface(PaymentDepositAbi);
const DEPOSIT = Wallet.createRandom().address;
const TOKEN = Wallet.createRandom().address;
const SETTLEMENT = Wallet.createRandom().address;

const logOf = (event: string, args: readonly unknown[]): ChainLog => {
  const { topics, data } = deposit.encodeEventLog(event, args);
  return {
    address: DEPOSIT.toLowerCase(),
    topics,
    data,
    blockNumber: 7,
    blockHash: `0x${'ab'.repeat(32)}`,
    txHash: `0x${'cd'.repeat(32)}`,
    logIndex: 3,
  };
};

describe('payment deposit logs', () => {
  it('decodes a deposit event into PaymentDepositEventObserved with its arguments as strings', () => {
    const paymentId = id('pay_1');
    const decoded = decodeContractEvent(
      'payment_deposit',
      'eip155:8453',
      logOf('PaymentCaptured', [paymentId, TOKEN, SETTLEMENT, 100n, 99n, 0n]),
    );
    expect(decoded).toEqual({
      type: PAYMENT_DEPOSIT_EVENT_OBSERVED,
      data: {
        chain: 'eip155:8453',
        blockNumber: '7',
        blockHash: `0x${'ab'.repeat(32)}`,
        txHash: `0x${'cd'.repeat(32)}`,
        logIndex: 3,
        contract: getAddress(DEPOSIT),
        event: 'PaymentCaptured',
        args: {
          paymentId,
          token: getAddress(TOKEN),
          settlement: getAddress(SETTLEMENT),
          amount: '100',
          received: '99',
          remainingEscrow: '0',
        },
      },
    });
  });

  it("leaves a log the deposit's ABI does not know to the caller (null)", () => {
    const foreign = {
      ...logOf('PaymentCaptured', [id('pay_2'), TOKEN, SETTLEMENT, 1n, 1n, 0n]),
      topics: [id('Unknown(uint256)')],
    };
    expect(decodeContractEvent('payment_deposit', 'eip155:8453', foreign)).toBeNull();
  });
});
