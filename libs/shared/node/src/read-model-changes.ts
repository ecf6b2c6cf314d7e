import { EventEmitter } from 'node:events';

/** How many committed rows are kept for waiters that arrive after their wake-up. */
const RECENT_ROWS = 4096;
/** Rows of batches that rolled back are never announced; their retry overwrites them. Bounded all the same. */
const STAGED_ROWS = 4096;
/**
 * How often a wait re-reads the row while the projection runs in this process: its commits wake the wait with the
 * row, so the poll is only the safety net for a row another instance of the projection wrote.
 */
const LOCAL_PROJECTION_POLL_MS = 200;

/**
 * In-process wake-ups for read-your-writes on one read model (`readAtLeastRevision`). The projection stages the row
 * each statement returned inside its batch transaction (`stage`, keyed by the bus message) and announces it once the
 * batch committed (`committed`): waiters on `<row id>` get the row itself and need no read, and one that starts
 * waiting after the announcement finds it in `latest`. A row is never announced before its commit, so nobody answers
 * with a row a rolled-back batch never stored. Where the projection runs in another process nothing is emitted here
 * and the reader polls instead.
 */
export class ReadModelChanges<
  Row extends { readonly id: string; readonly revision: number },
> extends EventEmitter {
  /** True while this process runs the projection (set by the projection). */
  projecting = false;
  private readonly recent = new Map<string, Row>();
  private readonly staged = new Map<string, Row>();

  constructor() {
    super();
    this.setMaxListeners(0);
  }

  /** The projection wrote `row` for the message inside its (still open) batch transaction. */
  stage(messageId: string, row: Row): void {
    this.staged.set(messageId, row);
    evictOldest(this.staged, STAGED_ROWS);
  }

  /**
   * The batch holding the message committed: its staged row is remembered and announced; without one (a projection
   * that does not stage), waiters on `key` are woken with the revision and read the row themselves.
   */
  committed(messageId: string, key: string, revision: number): void {
    const row = this.staged.get(messageId);
    if (!row) {
      this.emit(key, revision);
      return;
    }
    this.staged.delete(messageId);
    this.recent.delete(row.id);
    this.recent.set(row.id, row);
    evictOldest(this.recent, RECENT_ROWS);
    this.emit(row.id, row.revision, row);
  }

  /** The row this process's projection committed last under `id`, if still remembered. */
  latest(id: string): Row | undefined {
    return this.recent.get(id);
  }

  /**
   * The options of `readAtLeastRevision` that come from here for row `id`: the remembered row and, while the
   * projection runs in this process, its wake-ups with polls only as a safety net. `appended`: the caller has just
   * appended the change it waits for, so before the projection announces it the row cannot be there: no first read.
   */
  waitOptions(
    id: string,
    appended = false,
  ): { known: () => Row | undefined; skipFirstRead: boolean; pollMs?: number } {
    const local = this.projecting;
    return {
      known: () => this.latest(id),
      skipFirstRead: local && appended,
      ...(local ? { pollMs: LOCAL_PROJECTION_POLL_MS } : {}),
    };
  }
}

function evictOldest(map: Map<string, unknown>, size: number): void {
  if (map.size <= size) return;
  const oldest = map.keys().next().value;
  if (oldest !== undefined) map.delete(oldest);
}
