import { EventEmitter } from 'node:events';
import { readAtLeastRevision } from './read-your-writes';

interface Row {
  readonly revision: number;
  readonly from: string;
}

describe('readAtLeastRevision', () => {
  it('reads until the row reaches the revision, woken by the projection in between', async () => {
    const changes = new EventEmitter();
    const table: { row?: Row } = {};
    const read = jest.fn(async () => table.row);
    const waiting = readAtLeastRevision({ read, revision: 1, changes, key: 'k', pollMs: 60_000 });
    await new Promise((resolve) => setImmediate(resolve));
    table.row = { revision: 1, from: 'database' };
    changes.emit('k', 1);
    expect(await waiting).toEqual({ revision: 1, from: 'database' });
    expect(read).toHaveBeenCalledTimes(2);
  });

  it('takes the row the wake-up carries, and skips the first read when asked to', async () => {
    const changes = new EventEmitter();
    const read = jest.fn(async (): Promise<Row | undefined> => undefined);
    const waiting = readAtLeastRevision({
      read,
      revision: 0,
      changes,
      key: 'k',
      pollMs: 60_000,
      skipFirstRead: true,
    });
    changes.emit('k', 0, { revision: 0, from: 'projection' });
    expect(await waiting).toEqual({ revision: 0, from: 'projection' });
    expect(read).not.toHaveBeenCalled();
  });

  it('answers a row it already knows at the revision, and ignores one that is older', async () => {
    const changes = new EventEmitter();
    const read = jest.fn(async (): Promise<Row | undefined> => ({ revision: 2, from: 'database' }));
    const known = { revision: 2, from: 'known' };
    expect(await readAtLeastRevision({ read, revision: 2, changes, key: 'k', known: () => known })).toBe(
      known,
    );
    expect(read).not.toHaveBeenCalled();
    expect(
      await readAtLeastRevision({
        read,
        revision: 2,
        changes,
        key: 'k',
        known: () => ({ ...known, revision: 1 }),
      }),
    ).toEqual({ revision: 2, from: 'database' });
  });

  it('with the first read skipped and no wake-up, the poll reads after pollMs', async () => {
    const changes = new EventEmitter();
    const read = jest.fn(async (): Promise<Row | undefined> => ({ revision: 0, from: 'database' }));
    const row = await readAtLeastRevision({
      read,
      revision: 0,
      changes,
      key: 'k',
      pollMs: 5,
      skipFirstRead: true,
    });
    expect(row).toEqual({ revision: 0, from: 'database' });
    expect(read).toHaveBeenCalledTimes(1);
  });

  it('reports the read model as lagging after the timeout', async () => {
    const changes = new EventEmitter();
    await expect(
      readAtLeastRevision({
        read: async () => undefined,
        revision: 0,
        changes,
        key: 'k',
        pollMs: 5,
        timeoutMs: 20,
      }),
    ).rejects.toMatchObject({ code: 'read_model_lagging', status: 503 });
  });
});
