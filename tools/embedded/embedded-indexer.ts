import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { indexerConfigFromEnv, type IndexerConfig } from '@stablepay/indexer-service';
import { ConfigError, envOptional } from '@stablepay/util';
import { createWhole, readDataFile } from './data-files';

/** Where a persistent embedded run keeps the name it holds its chain followers' leases under. */
export const LEASE_OWNER_FILE = 'indexer-lease-owner';

/**
 * The indexer's configuration in the embedded run: local chains are read at their head (anvil mines a block per
 * transaction) and polled twice a second. A persistent run holds its followers' leases under a name kept in its data
 * directory: after a kill -9 the restart re-takes them at once, where a fresh name per run waited up to 30 s for the
 * dead run's to expire (the first payment after the restart was seen that much later). Only one run at a time holds
 * a data directory (its lock, taken before this is called), which is what a shared lease owner requires. In memory
 * there is no predecessor and no name. INDEXER_LEASE_OWNER, when set, wins.
 */
export function embeddedIndexerConfig(
  env: Record<string, string | undefined>,
  dataDir: string | null,
): IndexerConfig {
  const leaseOwner =
    envOptional(env, 'INDEXER_LEASE_OWNER') ??
    (dataDir === null ? undefined : dataDirLeaseOwner(join(dataDir, LEASE_OWNER_FILE)));
  return indexerConfigFromEnv({
    INDEXER_CONFIRMATIONS: '0',
    INDEXER_POLL_MS: '500',
    ...env,
    ...(leaseOwner !== undefined ? { INDEXER_LEASE_OWNER: leaseOwner } : {}),
  });
}

/**
 * Random, not the directory's path: two data directories at the same path on two machines sharing one DATABASE_URL
 * must not share a lease owner.
 */
function dataDirLeaseOwner(file: string): string {
  if (readDataFile(file) === undefined)
    createWhole(file, `embedded-${randomBytes(16).toString('hex')}\n`, { mode: 0o600 });
  const owner = readDataFile(file) ?? '';
  if (!/^embedded-[0-9a-f]{32}$/.test(owner))
    throw new ConfigError(`${file} does not hold an embedded lease owner (embedded-<32 hex characters>)`);
  return owner;
}
