import { makeError } from 'ethers';
import { isDependencyOutage, isTransient } from './failure-kind';

describe('isDependencyOutage', () => {
  const info = { request: undefined as never, response: undefined as never };

  it('takes an unreachable chain node, gRPC service or socket for an outage, also wrapped in another error', () => {
    const outages: unknown[] = [
      makeError('server response 502 Bad Gateway', 'SERVER_ERROR', info),
      makeError('network error', 'NETWORK_ERROR', { event: 'noNetwork' }),
      makeError('timeout', 'TIMEOUT', { operation: 'request', reason: 'timeout' }),
      Object.assign(new Error('14 UNAVAILABLE: No connection established'), {
        code: 14,
        details: '',
        metadata: {},
      }),
      Object.assign(new Error('4 DEADLINE_EXCEEDED'), {
        code: 4,
        details: 'Deadline exceeded',
        metadata: {},
      }),
      Object.assign(new Error('unavailable'), { code: 'UNAVAILABLE' }),
      // fetch (undici): TypeError('fetch failed') with the socket error as its cause.
      new TypeError('fetch failed', { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) }),
      new TypeError('fetch failed', { cause: { code: 'UND_ERR_CONNECT_TIMEOUT' } }),
      // ethers keeps the transport's error in `error`.
      Object.assign(new Error('could not detect network'), {
        code: 'UNKNOWN_ERROR',
        error: { code: 'ECONNRESET' },
      }),
    ];
    for (const error of outages) {
      expect({ error: String(error), outage: isDependencyOutage(error) }).toEqual({
        error: String(error),
        outage: true,
      });
      expect(isTransient(error)).toBe(true);
    }
  });

  it("leaves a call's own failure (a revert, a bad argument, a constraint) to isolation", () => {
    const own: unknown[] = [
      makeError('execution reverted', 'CALL_EXCEPTION', {
        action: 'call',
        data: '0x',
        reason: null,
        transaction: { to: null, data: '0x' },
        invocation: null,
        revert: null,
      }),
      makeError('invalid address', 'INVALID_ARGUMENT', { argument: 'to', value: 'x' }),
      Object.assign(new Error('duplicate key value'), { code: '23505' }),
      // A numeric code alone is no gRPC status.
      Object.assign(new Error('fourteen'), { code: 14 }),
      new Error('the database refuses this draft'),
    ];
    for (const error of own) expect(isDependencyOutage(error)).toBe(false);
  });
});
