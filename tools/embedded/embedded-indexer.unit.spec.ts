import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embeddedIndexerConfig, LEASE_OWNER_FILE } from './embedded-indexer';

describe('the embedded run’s indexer configuration', () => {
  const dirs: string[] = [];
  const dataDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), 'stablepay-lease-owner-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('holds the followers’ leases under one name per data directory, the same on every restart', () => {
    const dir = dataDir();
    const first = embeddedIndexerConfig({}, dir).leaseOwner;
    expect(first).toMatch(/^embedded-[0-9a-f]{32}$/);
    // A restart after kill -9 re-takes the killed run's leases at once only if it holds them under the same name.
    expect(embeddedIndexerConfig({}, dir).leaseOwner).toBe(first);
    expect(statSync(join(dir, LEASE_OWNER_FILE)).mode & 0o077).toBe(0);
    // Another data directory is another run, which must wait for this one's leases.
    expect(embeddedIndexerConfig({}, dataDir()).leaseOwner).not.toBe(first);
  });

  it('gives an in-memory run no stable name (it has no predecessor), and lets INDEXER_LEASE_OWNER win', () => {
    expect(embeddedIndexerConfig({}, null).leaseOwner).toBeUndefined();
    expect(embeddedIndexerConfig({ INDEXER_LEASE_OWNER: 'ops-a' }, dataDir()).leaseOwner).toBe('ops-a');
    // The embedded defaults stay: local chains are read at their head, twice a second.
    expect(embeddedIndexerConfig({}, null)).toMatchObject({ pollMs: 500, chains: [] });
  });

  it('refuses a lease owner file it did not write', () => {
    const dir = dataDir();
    writeFileSync(join(dir, LEASE_OWNER_FILE), 'someone else\n');
    expect(() => embeddedIndexerConfig({}, dir)).toThrow(LEASE_OWNER_FILE);
  });
});
