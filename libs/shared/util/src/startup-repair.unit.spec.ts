import { runStartupRepair } from './startup-repair';

describe('runStartupRepair', () => {
  const messages = { repaired: 'rows rebuilt', failed: 'repair failed; it runs again at the next start' };
  const logger = () => ({ log: jest.fn(), error: jest.fn() });

  it('logs what it repaired, and nothing when there was nothing to repair', async () => {
    const l = logger();
    await runStartupRepair(l, async () => ['a', 'b'], messages);
    await runStartupRepair(l, async () => [], messages);
    expect(l.log).toHaveBeenCalledTimes(1);
    expect(l.log).toHaveBeenCalledWith({ msg: 'rows rebuilt', repaired: ['a', 'b'] });
    expect(l.error).not.toHaveBeenCalled();
  });

  it('lets the process start when the repair fails, logging why', async () => {
    const l = logger();
    await expect(
      runStartupRepair(l, () => Promise.reject(new Error('event store unreachable')), messages),
    ).resolves.toBeUndefined();
    expect(l.error).toHaveBeenCalledWith({ msg: messages.failed, error: 'event store unreachable' });
  });
});
