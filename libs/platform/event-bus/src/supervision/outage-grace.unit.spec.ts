import { isDeclaredRetryable, isTransient } from './failure-kind';
import { OutageGrace } from './outage-grace';

describe('OutageGrace', () => {
  const start = new Date('2026-11-24T07:00:00.000Z');
  const after = (ms: number) => new Date(start.getTime() + ms);

  it('gives a message its grace from its first failure: retried as an outage (never parked) within it, a plain failure (parked) from then on', () => {
    const grace = new OutageGrace(60_000);
    const first = grace.unavailable('evt_1', 'screening unreachable', start);
    expect(first).toMatchObject({ name: 'DependencyUnavailableError', retryable: true });
    expect(isDeclaredRetryable(first)).toBe(true);
    expect(isDeclaredRetryable(grace.unavailable('evt_1', 'screening unreachable', after(59_999)))).toBe(
      true,
    );
    const past = grace.unavailable('evt_1', 'screening unreachable', after(60_000));
    expect(isDeclaredRetryable(past)).toBe(false);
    // Nothing else makes the bus keep it in place: no outage code, no timeout in its message.
    expect(isTransient(past)).toBe(false);
    // Another message failing now has a grace of its own.
    expect(isDeclaredRetryable(grace.unavailable('evt_2', 'screening unreachable', after(60_000)))).toBe(
      true,
    );
  });

  it('starts a new grace for a message once the dependency answered it', () => {
    const grace = new OutageGrace(60_000);
    grace.unavailable('evt_1', 'screening unreachable', start);
    grace.answered('evt_1');
    expect(isDeclaredRetryable(grace.unavailable('evt_1', 'screening unreachable', after(120_000)))).toBe(
      true,
    );
  });
});
