import type { EventEmitter } from 'node:events';
import { DomainError } from './errors';

/**
 * Read-your-writes for a projected row: resolves with the row once it reflects at least `revision` of its stream.
 * The projection in this process wakes the wait at once by emitting `key` on `changes` (with the revision, and the
 * row it committed when it has one, which then needs no read); polling every `pollMs` (25 ms) covers a projection
 * running in another process. After `timeoutMs` the write stands but the read is reported as lagging.
 *
 * `known` returns a row this process already holds (what its projection committed last), checked before any
 * read. `skipFirstRead` is for a caller that has just appended and whose projection runs in this process: the row
 * cannot be there yet unless the projection already committed it (which `known` reports), so the first read is
 * skipped and the wait starts at once.
 */
export async function readAtLeastRevision<Row extends { readonly revision: number }>(options: {
  readonly read: () => Promise<Row | undefined>;
  readonly revision: number;
  readonly changes: EventEmitter;
  readonly key: string;
  readonly timeoutMs?: number;
  readonly pollMs?: number;
  readonly known?: () => Row | undefined;
  readonly skipFirstRead?: boolean;
}): Promise<Row> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  const pollMs = options.pollMs ?? 25;
  for (let first = true; ; first = false) {
    const known = options.known?.();
    if (known && known.revision >= options.revision) return known;
    if (!(first && options.skipFirstRead)) {
      const row = await options.read();
      if (row && row.revision >= options.revision) return row;
      // The projection may have committed while the read was under way.
      const after = options.known?.();
      if (after && after.revision >= options.revision) return after;
    }
    if (Date.now() > deadline) {
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'read_model_lagging',
        message: 'The change was saved but is not readable yet; retry the read shortly.',
      });
    }
    const woken = await new Promise<Row | undefined>((resolve) => {
      const wake = (_revision: unknown, row?: Row) => {
        clearTimeout(timer);
        resolve(row);
      };
      const timer = setTimeout(() => {
        options.changes.off(options.key, wake);
        resolve(undefined);
      }, pollMs);
      options.changes.once(options.key, wake);
    });
    if (woken && typeof woken === 'object' && woken.revision >= options.revision) return woken;
  }
}
