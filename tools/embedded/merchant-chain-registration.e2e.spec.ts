import { Wallet } from 'ethers';
import { Client } from 'pg';
import { IndexerWatchClient } from '@stablepay/chain-operator';
import { connectStablepayRegistry, toOnChainId } from '@stablepay/contracts';
import { localChainProvider } from '@stablepay/local-chains';
import { MerchantChainRegistration } from '@stablepay/merchants-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The merchant on chain: POST /settings (signer + settlement) -> merchant events -> the registration reaction ->
 * registry.registerMerchant by the operator on every local chain; a later change is not made by the operator.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';

async function until<T>(
  probe: () => Promise<T | null | undefined | false>,
  what: string,
  seen?: () => Promise<unknown>,
): Promise<T> {
  for (let i = 0; i < 600; i++) {
    const value = await probe();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `timed out waiting for ${what}${seen ? `; last seen ${JSON.stringify(await seen())}` : ''}`,
  );
}

describe('merchant registration on chain (embedded stack, local chains)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: { DATABASE_URL: db.url, PORT: '0', ADMIN_TOKEN, LOG_LEVEL: 'error', LOCAL_CHAIN_IDS: '8453,137' },
      dataDir: 'memory',
    });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  const newMerchant = async (): Promise<{ id: string; key: string }> => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Acme', mode: 'test' }),
    });
    const body = (await res.json()) as { id: string; api_key: string };
    return { id: body.id, key: body.api_key };
  };

  const settings = (key: string, method: 'POST' | 'PUT', body: unknown) =>
    fetch(`${stack.url}/settings`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  /** GET /settings `signers[]`: status by chain. */
  const signerStatuses = async (key: string): Promise<Record<string, string>> => {
    const res = await fetch(`${stack.url}/settings`, { headers: { authorization: `Bearer ${key}` } });
    const body = (await res.json()) as { signers: Array<{ chain: string; status: string }> };
    return Object.fromEntries(body.signers.map((s) => [s.chain, s.status]));
  };

  const onChain = async (
    chain: { rpcUrl: string; chainId: number; addresses: { registry: string } },
    id: string,
  ) => {
    const provider = localChainProvider(chain.rpcUrl, chain.chainId);
    try {
      const [signer, settlement] = (await connectStablepayRegistry(
        chain.addresses.registry,
        provider,
      ).merchant(toOnChainId(id))) as unknown as [string, string];
      return { signer, settlement };
    } finally {
      provider.destroy();
    }
  };

  it('registers the signer and settlement address on every supported chain, once, and keeps a status', async () => {
    const merchant = await newMerchant();
    const signer = Wallet.createRandom();
    const settlement = Wallet.createRandom();
    expect((await settings(merchant.key, 'POST', { merchant_signer: signer.address })).status).toBe(200);
    // A signer alone is not registrable: the registry needs a settlement address too. Settings say it is given but
    // not in any chain's registry.
    expect(await signerStatuses(merchant.key)).toEqual({ 'eip155:8453': 'pending', 'eip155:137': 'pending' });
    const chains = stack.chains?.chains ?? [];
    expect(chains).toHaveLength(2);
    expect((await settings(merchant.key, 'PUT', { settlement_address: settlement.address })).status).toBe(
      200,
    );

    const reaction = stack.service.app.get(MerchantChainRegistration);
    const rows = await until(
      async () => {
        const r = await reaction.statusOf(merchant.id);
        return r.length === 2 && r.every((row) => row.status === 'registered') ? r : null;
      },
      'both chains registered',
      () => reaction.statusOf(merchant.id),
    );
    expect(rows.map((r) => r.chain).sort()).toEqual(['eip155:137', 'eip155:8453']);
    for (const row of rows) expect(row.tx_hash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await signerStatuses(merchant.key)).toEqual({
      'eip155:8453': 'registered',
      'eip155:137': 'registered',
    });
    for (const chain of chains) {
      expect(await onChain(chain, merchant.id)).toEqual({
        signer: signer.address,
        settlement: settlement.address,
      });
    }
  }, 120_000);

  it('does not change a registered merchant: a new settlement address is reported as needing the merchant', async () => {
    const merchant = await newMerchant();
    const signer = Wallet.createRandom();
    const first = Wallet.createRandom();
    const second = Wallet.createRandom();
    await settings(merchant.key, 'POST', {
      merchant_signer: signer.address,
      settlement_address: first.address,
    });
    const reaction = stack.service.app.get(MerchantChainRegistration);
    await until(async () => {
      const r = await reaction.statusOf(merchant.id);
      return r.length === 2 && r.every((row) => row.status === 'registered');
    }, 'first registration');

    expect((await settings(merchant.key, 'PUT', { settlement_address: second.address })).status).toBe(200);
    const rows = await until(async () => {
      const r = await reaction.statusOf(merchant.id);
      return r.every((row) => row.status === 'change_requires_merchant_signature') ? r : null;
    }, 'the change to be refused to the operator');
    for (const row of rows) expect(row.last_error).toContain(first.address);
    for (const chain of stack.chains?.chains ?? []) {
      expect((await onChain(chain, merchant.id)).settlement).toBe(first.address);
    }
  }, 120_000);

  it('the indexer watches an address or a contract asked through its command (idempotent, errors travel back)', async () => {
    const watch = stack.service.app.get(IndexerWatchClient);
    const address = Wallet.createRandom().address;
    expect(await watch.watchAddress({ chain: 'eip155:8453', address, fromBlock: 1 })).toEqual({
      created: true,
    });
    expect(await watch.watchAddress({ chain: 'eip155:8453', address })).toEqual({ created: false });
    const manager = Wallet.createRandom().address;
    expect(
      await watch.watchContract({ chain: 'eip155:137', address: manager, kind: 'subscription_manager' }),
    ).toEqual({
      created: true,
    });
    await expect(
      watch.watchContract({ chain: 'eip155:137', address: manager, kind: 'token' }),
    ).rejects.toMatchObject({
      param: 'kind',
    });
    await expect(watch.watchAddress({ chain: 'eip155:8453', address: 'nope' })).rejects.toThrow();
    const pg = new Client({ connectionString: db.url });
    await pg.connect();
    try {
      const rows = await pg.query<{ address: string }>(
        'SELECT address FROM indexer_watched_addresses WHERE chain = $1 AND address = $2',
        ['eip155:8453', address.toLowerCase()],
      );
      expect(rows.rowCount).toBe(1);
    } finally {
      await pg.end();
    }
  });
});
