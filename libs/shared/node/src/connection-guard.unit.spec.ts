import { AsyncLocalStorage } from 'node:async_hooks';
import { insideTransaction, installConnectionGuard } from './connection-guard';

describe('insideTransaction', () => {
  it('enters no AsyncLocalStorage (Node turns async hooks on for good at the first run) until the guard is installed', async () => {
    const run = jest.spyOn(AsyncLocalStorage.prototype, 'run');
    try {
      await expect(insideTransaction(async () => 'done')).resolves.toBe('done');
      await expect(insideTransaction(async () => Promise.reject(new Error('failed')))).rejects.toThrow(
        'failed',
      );
      expect(run).not.toHaveBeenCalled();

      installConnectionGuard();
      await expect(insideTransaction(async () => 'guarded')).resolves.toBe('guarded');
      expect(run).toHaveBeenCalledTimes(1);
    } finally {
      run.mockRestore();
    }
  });
});
