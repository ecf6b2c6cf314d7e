import { keccak256 } from 'ethers';
import { PaymentDepositBytecode, PaymentFactoryBytecode } from './generated';

/**
 * Every payment's deposit address is CREATE2(PaymentFactory, salt, clone of the implementation the factory creates),
 * and the factory itself sits at CREATE2(deployer, salt, its creation code + registry): any change to the code of
 * PaymentFactory or PaymentDeposit moves the factory, hence every deposit address. Payments created before the
 * change keep the address their customers paid, which only the old factory can deploy (and only with the old
 * deposit code: the old ABI). The deposit flow refuses to deploy a payment through a factory that did not compute
 * its address (DepositContracts), so such a payment would wait for good.
 *
 * A new deposit contract therefore comes as a new version BESIDE this one (its own sources and artifacts, both
 * factories deployed and known, the version recorded per payment; docs/payment-deposits.md, "Deposit contract
 * versions"), never as an edit of these. Comment-only edits do not change the code (no CBOR metadata).
 */
describe('the PaymentFactory and PaymentDeposit code existing deposit addresses commit to (version 1)', () => {
  it('is unchanged (a code change strands every payment created before it: add a version instead)', () => {
    expect({
      PaymentFactory: keccak256(PaymentFactoryBytecode),
      PaymentDeposit: keccak256(PaymentDepositBytecode),
    }).toEqual({
      PaymentFactory: '0x2f58e98b93b156ac0236c5a67ad6a2b0912b8c33319cc078cc85b16068881781',
      PaymentDeposit: '0xf8014ef922a6b064c66eba92c69f590d252bd9e09a3acec7093d9e9cab982965',
    });
  });
});
