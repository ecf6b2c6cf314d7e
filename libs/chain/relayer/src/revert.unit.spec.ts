import { AbiCoder, Interface, id, makeError } from 'ethers';
import { UNKNOWN_REVERT, decodeRevert, revertDataOf } from './revert';

const abi = new Interface([
  'error BudgetExceeded(uint256 spent, uint256 budget)',
  'error SubscriptionNotActive()',
]);
const encode = (signature: string, types: string[], values: unknown[]): string =>
  id(signature).slice(0, 10) + AbiCoder.defaultAbiCoder().encode(types, values).slice(2);

describe('decodeRevert', () => {
  it('names a custom error from the ABI and decodes its args', () => {
    const data = encode('BudgetExceeded(uint256,uint256)', ['uint256', 'uint256'], [5n, 4n]);
    expect(decodeRevert(abi, data)).toEqual({
      errorName: 'BudgetExceeded',
      args: [5n, 4n],
      selector: data.slice(0, 10),
      data,
    });
  });

  it('names an argument-less custom error', () => {
    expect(decodeRevert(abi, id('SubscriptionNotActive()').slice(0, 10)).errorName).toBe(
      'SubscriptionNotActive',
    );
  });

  it('names a Solidity panic Panic with its code', () => {
    const data = encode('Panic(uint256)', ['uint256'], [0x11n]);
    expect(decodeRevert(abi, data)).toMatchObject({ errorName: 'Panic', args: [0x11n] });
  });

  it('calls empty revert data UnknownRevert without a selector', () => {
    expect(decodeRevert(abi, '0x')).toEqual({
      errorName: UNKNOWN_REVERT,
      args: [],
      selector: null,
      data: '0x',
    });
  });

  it('calls a known selector with an undecodable payload UnknownRevert instead of guessing', () => {
    const data = id('BudgetExceeded(uint256,uint256)').slice(0, 10) + 'ff';
    expect(decodeRevert(abi, data)).toMatchObject({ errorName: UNKNOWN_REVERT, selector: data.slice(0, 10) });
  });
});

const callException = (data: string | null) =>
  makeError('reverted', 'CALL_EXCEPTION', {
    action: 'call',
    data,
    reason: null,
    transaction: { to: null, data: '0x' },
    invocation: null,
    revert: null,
  });

describe('revertDataOf', () => {
  it('returns the data of a call exception', () => {
    expect(revertDataOf(callException('0x1234'))).toBe('0x1234');
  });

  it('returns 0x for a call exception without data', () => {
    expect(revertDataOf(callException(null))).toBe('0x');
  });

  it('returns null for errors that are not reverts, so they are not mistaken for a contract rejection', () => {
    expect(revertDataOf(makeError('no money', 'INSUFFICIENT_FUNDS'))).toBeNull();
    expect(revertDataOf(new Error('socket hang up'))).toBeNull();
  });
});
