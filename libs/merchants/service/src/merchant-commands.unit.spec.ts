import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { InMemoryEventStore } from '@stablepay/event-store';
import { merchantStreamId } from '@stablepay/merchants-domain';
import { fingerprint, ManualClock, SecretBox } from '@stablepay/util';
import type { ContractSignatureVerifier } from './contract-signatures';
import { MerchantCommands } from './merchant-commands';
import type { MerchantsConfig } from './merchants.config';
import type { MerchantSettingsRow, SettingsReader } from './settings.reader';
import type { WebhookSecrets } from './webhook-secrets';

describe('MerchantCommands', () => {
  it('answers the webhook secret a settings update issued even when a rotation landed before the read model was read', async () => {
    const store = new InMemoryEventStore();
    const clock = new ManualClock('2026-11-23T00:00:00Z');
    const config = { allowLocalWebhooks: true, secretBox: new SecretBox(randomBytes(32)) } as MerchantsConfig;
    // The read model as a request sees it: no secret before; at the update's revision, already the secret of a
    // rotation appended right after (another request of the same merchant).
    const reader = {
      get: async () => ({ webhook_secret_id: null }) as MerchantSettingsRow,
      getAtLeast: async () => ({ webhook_secret_id: 'whs_rotated_after' }) as MerchantSettingsRow,
    } as unknown as SettingsReader;
    const dataSource = { query: async () => [] } as unknown as DataSource;
    const commands = new MerchantCommands(
      store,
      dataSource,
      clock,
      config,
      reader,
      {} as ContractSignatureVerifier,
      {} as WebhookSecrets,
    );
    await commands.createMerchant({ name: 'Acme', mode: 'test', settlementMode: 'crypto' });
    const [created] = await store.readAll();
    const merchantId = (created?.data as { merchantId: string }).merchantId;

    const { issuedSecret } = await commands.updateProfile(merchantId, {
      webhookUrl: 'http://127.0.0.1:9/hook',
    });

    const issued = (await store.readStream(merchantStreamId(merchantId))).find(
      (e) => e.type === 'WebhookSecretIssued.v1',
    );
    expect(issuedSecret).toMatch(/^whsec_/);
    expect((issued?.data as { fingerprint: string }).fingerprint).toBe(fingerprint(issuedSecret ?? ''));
  });
});
