import { Logger } from '@nestjs/common';
import { ReadModelTimer, type DueRow } from './read-model-timer';

/** A read-model queue in memory: rows stay due until `fire` removes them, as a projection would. */
class FakeTimer extends ReadModelTimer<DueRow> {
  protected readonly logger = new Logger('test-timer');
  readonly fired: string[] = [];
  queries = 0;

  constructor(
    public rows: DueRow[],
    private readonly heldOff: Set<string>,
    batch: number,
  ) {
    super(() => 60_000, batch);
  }

  protected now(): Date {
    return new Date('2030-01-01T00:00:00Z');
  }

  protected async due(now: Date, limit: number, after?: DueRow): Promise<DueRow[]> {
    this.queries += 1;
    return this.rows
      .filter((r) => r.dueAt <= now)
      .filter((r) => !after || r.dueAt > after.dueAt || (+r.dueAt === +after.dueAt && r.id > after.id))
      .sort((a, b) => +a.dueAt - +b.dueAt || a.id.localeCompare(b.id))
      .slice(0, limit);
  }

  protected async fire(row: DueRow): Promise<boolean> {
    this.fired.push(row.id);
    if (this.heldOff.has(row.id)) return false;
    this.rows = this.rows.filter((r) => r.id !== row.id);
    return true;
  }
}

const at = (iso: string, id: string): DueRow => ({ id, dueAt: new Date(iso) });

describe('ReadModelTimer', () => {
  it('fires every due row once, in due order, across batches, and leaves rows not yet due', async () => {
    const rows = [
      at('2029-01-03T00:00:00Z', 'c'),
      at('2029-01-01T00:00:00Z', 'a'),
      at('2029-01-02T00:00:00Z', 'b'),
      at('2031-01-01T00:00:00Z', 'later'),
    ];
    const timer = new FakeTimer(rows, new Set(), 2);
    await expect(timer.tick()).resolves.toBe(3);
    expect(timer.fired).toEqual(['a', 'b', 'c']);
    expect(timer.rows.map((r) => r.id)).toEqual(['later']);
  });

  it('walks past rows that stay due but change nothing instead of asking for them again', async () => {
    // A full batch of held-off rows: without the cursor the tick would fetch the same batch forever.
    const rows = [
      at('2029-01-01T00:00:00Z', 'a'),
      at('2029-01-01T00:00:00Z', 'b'),
      at('2029-01-02T00:00:00Z', 'c'),
    ];
    const timer = new FakeTimer(rows, new Set(['a', 'b']), 2);
    await expect(timer.tick()).resolves.toBe(1);
    expect(timer.fired).toEqual(['a', 'b', 'c']);
    expect(timer.queries).toBe(2);
  });
});
