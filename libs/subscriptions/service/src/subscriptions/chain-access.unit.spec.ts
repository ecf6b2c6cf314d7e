import { DomainError } from '@stablepay/util';
import { fromChain } from './chain-access';

const refused = () =>
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8545'), { code: 'ECONNREFUSED' });

describe('fromChain: a chain node that does not answer', () => {
  it('is 503 chain_unavailable naming the chain, not the RPC error (it can carry the node URL and its key)', async () => {
    const answer = fromChain('eip155:8453', Promise.reject(refused()));
    await expect(answer).rejects.toBeInstanceOf(DomainError);
    await expect(answer).rejects.toMatchObject({
      status: 503,
      type: 'api_error',
      code: 'chain_unavailable',
      message: expect.not.stringContaining('127.0.0.1') as unknown,
    });
  });

  it('is judged through the wrapping error too (ethers keeps the transport error in `error`)', async () => {
    const wrapped = Object.assign(new Error('could not coalesce error'), {
      code: 'UNKNOWN_ERROR',
      error: refused(),
    });
    await expect(fromChain('eip155:8453', Promise.reject(wrapped))).rejects.toMatchObject({
      code: 'chain_unavailable',
    });
  });

  it('leaves every other failure as it is (a revert, a refusal of ours, a bug)', async () => {
    const revert = Object.assign(new Error('execution reverted'), { code: 'CALL_EXCEPTION' });
    await expect(fromChain('eip155:8453', Promise.reject(revert))).rejects.toBe(revert);
    const ours = new DomainError({
      type: 'invalid_request',
      status: 409,
      code: 'merchant_change_pending',
      message: 'x',
    });
    await expect(fromChain('eip155:8453', Promise.reject(ours))).rejects.toBe(ours);
    await expect(fromChain('eip155:8453', Promise.resolve(7))).resolves.toBe(7);
  });
});
