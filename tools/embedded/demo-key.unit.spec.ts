import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sealingKey } from './data-files';
import { demoMerchant } from './demo-key';

describe('the demo merchant and the data directory files across a kill -9', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'demo-key-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** The merchants the database holds, by API key: what survives the process. */
  const database = () => {
    const byKey = new Map<string, string>();
    return {
      byKey,
      find: async (apiKey: string) => byKey.get(apiKey),
      create: async (apiKey: string) => {
        const id = `mer_${byKey.size + 1}`;
        byKey.set(apiKey, id);
        return id;
      },
    };
  };

  it('a start killed right after it created the demo merchant finds that merchant at the next start, no second one', async () => {
    const keyFile = join(dir, 'demo-api-key');
    const db = database();
    const killed = new Error('killed -9 after the merchant was appended');
    await expect(
      demoMerchant({
        envKey: undefined,
        keyFile,
        find: db.find,
        create: async (apiKey) => {
          await db.create(apiKey);
          throw killed;
        },
      }),
    ).rejects.toBe(killed);

    const next = await demoMerchant({ envKey: undefined, keyFile, find: db.find, create: db.create });

    expect(next.merchantId).toBe('mer_1');
    expect(db.byKey.size).toBe(1);
    expect(readFileSync(keyFile, 'utf8').trim()).toBe(next.apiKey);
  });

  it('a blank demo key file (a start killed between creating and writing it) is no key yet: the start goes on', async () => {
    const keyFile = join(dir, 'demo-api-key');
    writeFileSync(keyFile, '');
    const db = database();

    const demo = await demoMerchant({ envKey: undefined, keyFile, find: db.find, create: db.create });

    expect(demo.apiKey).toMatch(/^sk_test_/);
    expect(readFileSync(keyFile, 'utf8').trim()).toBe(demo.apiKey);
  });

  it('a blank sealing key file is made again, not refused at every start', () => {
    const file = join(dir, 'webhook-secret-key');
    writeFileSync(file, '');

    const key = sealingKey(file);

    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(sealingKey(file)).toBe(key);
  });
});
