import type { EventEmitter } from 'node:events';
import { DomainError } from './errors';

/**
 * Read-your-writes for a projected row: resolves with the row once it reflects at least `revision` of its stream.
 * The projection in this process wakes the wait at once by emitting `key` on `changes`; polling every 25 ms covers
 * a projection running in another process. After `timeoutMs` the write stands but the read is reported as lagging.
 */
export async function readAtLeastRevision<Row extends { readonly revision: number }>(options: {
  readonly read: () => Promise<Row | undefined>;
  readonly revision: number;
  readonly changes: EventEmitter;
  readonly key: string;
  readonly timeoutMs?: number;
}): Promise<Row> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  for (;;) {
    const row = await options.read();
    if (row && row.revision >= options.revision) return row;
    if (Date.now() > deadline) {
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'read_model_lagging',
        message: 'The change was saved but is not readable yet; retry the read shortly.',
      });
    }
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        options.changes.off(options.key, wake);
        resolve();
      }, 25);
      options.changes.once(options.key, wake);
    });
  }
}
