import { ReadModelChanges } from './read-model-changes';

interface Row {
  readonly id: string;
  readonly revision: number;
}

describe('ReadModelChanges', () => {
  it('announces a staged row only once its batch committed, and remembers it for later waiters', () => {
    const changes = new ReadModelChanges<Row>();
    const heard: unknown[][] = [];
    changes.on('row_1', (...args: unknown[]) => heard.push(args));

    changes.stage('msg-1', { id: 'row_1', revision: 3 });
    expect(heard).toEqual([]);
    expect(changes.latest('row_1')).toBeUndefined();

    changes.committed('msg-1', 'row_1', 3);
    expect(heard).toEqual([[3, { id: 'row_1', revision: 3 }]]);
    expect(changes.latest('row_1')).toEqual({ id: 'row_1', revision: 3 });
  });

  it('wakes waiters with the revision alone when nothing was staged for the message', () => {
    const changes = new ReadModelChanges<Row>();
    const heard: unknown[][] = [];
    changes.on('row_2', (...args: unknown[]) => heard.push(args));

    changes.committed('msg-2', 'row_2', 5);
    expect(heard).toEqual([[5]]);
    expect(changes.latest('row_2')).toBeUndefined();
  });

  it('skips the first read only while the projection runs here and the caller appended the change itself', () => {
    const changes = new ReadModelChanges<Row>();
    expect(changes.waitOptions('row_3', true)).toMatchObject({ skipFirstRead: false });
    expect(changes.waitOptions('row_3', true).pollMs).toBeUndefined();

    changes.projecting = true;
    expect(changes.waitOptions('row_3', false)).toMatchObject({ skipFirstRead: false, pollMs: 200 });
    expect(changes.waitOptions('row_3', true)).toMatchObject({ skipFirstRead: true, pollMs: 200 });
  });
});
