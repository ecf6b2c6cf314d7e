import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { InMemoryEventStore } from '@stablepay/event-store';
import { merchantStreamId } from '@stablepay/merchants-domain';
import { computeSubscriptionManagerAddress, toOnChainId } from '@stablepay/contracts';
import { fingerprint, ManualClock, SecretBox } from '@stablepay/util';
import type { ContractSignatureVerifier } from './contract-signatures';
import { MerchantCommands } from './merchant-commands';
import type { MerchantsConfig } from './merchants.config';
import type { MerchantSettingsRow, SettingsReader } from './settings.reader';
import type { WebhookSecrets } from './webhook-secrets';

/** Commands over an in-memory store and a stubbed read model; no row names a deployed subscription manager. */
function merchantCommands(
  store: InMemoryEventStore,
  config: MerchantsConfig,
  reader: SettingsReader,
  clock: ManualClock,
): MerchantCommands {
  const dataSource = { query: async () => [] } as unknown as DataSource;
  return new MerchantCommands(
    store,
    dataSource,
    clock,
    config,
    reader,
    {} as ContractSignatureVerifier,
    {} as WebhookSecrets,
  );
}

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
    const commands = merchantCommands(store, config, reader, clock);
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

describe('MerchantCommands: the merchant its own subscription manager before it is deployed', () => {
  const factory = '0x1111111111111111111111111111111111111111';
  const registry = '0x2222222222222222222222222222222222222222';
  const pauser = '0x3333333333333333333333333333333333333333';

  async function merchantWithPauser(merchantPauser: string | null) {
    const store = new InMemoryEventStore();
    const config = {
      allowLocalWebhooks: true,
      secretBox: new SecretBox(randomBytes(32)),
      knownContracts: new Map<string, string>(),
      registryAddress: registry,
      subscriptionManagerFactoryAddress: factory,
    } as unknown as MerchantsConfig;
    // No manager deployed (subscription_manager_address null, no row names it): only the pauser is declared.
    const row = {
      merchant_pauser: merchantPauser,
      subscription_manager_address: null,
    } as MerchantSettingsRow;
    const reader = {
      find: async () => row,
      get: async () => row,
      getAtLeast: async () => row,
    } as unknown as SettingsReader;
    const commands = merchantCommands(store, config, reader, new ManualClock('2026-11-23T00:00:00Z'));
    await commands.createMerchant({ name: 'Acme', mode: 'test', settlementMode: 'crypto' });
    const [created] = await store.readAll();
    const merchantId = (created?.data as { merchantId: string }).merchantId;
    const manager = computeSubscriptionManagerAddress(factory, registry, toOnChainId(merchantId), pauser);
    return { store, commands, merchantId, manager };
  }

  it('refuses the address its manager will have as settlement address or signer, with the deployed-manager error', async () => {
    const { store, commands, merchantId, manager } = await merchantWithPauser(pauser);
    const before = (await store.readAll()).length;
    const ownManager = {
      status: 400,
      type: 'validation_error',
      param: 'settlement_address',
      code: 'invalid_address',
      message: expect.stringContaining('your own subscription manager contract'),
    };
    for (const address of [manager, manager.toLowerCase()])
      await expect(commands.updateSettlementAddress(merchantId, address)).rejects.toThrow(
        expect.objectContaining(ownManager),
      );
    const configured = await commands
      .configureSettlement(merchantId, { settlementAddress: manager })
      .catch((e: unknown) => e);
    expect(configured).toMatchObject({ param: 'settlement_address', code: 'invalid_address' });
    const signer = await commands.registerSigner(merchantId, manager).catch((e: unknown) => e);
    expect(signer).toMatchObject({ status: 400, param: 'merchant_signer', code: 'invalid_address' });
    expect((await store.readAll()).length).toBe(before);
  });

  it('takes that address while no pauser is declared (no manager address is fixed yet)', async () => {
    const { commands, merchantId, manager } = await merchantWithPauser(null);
    await expect(commands.updateSettlementAddress(merchantId, manager)).resolves.toBeDefined();
  });
});

describe('MerchantCommands: a keyed create that outlived its claim', () => {
  it("is refused by the key's claim time when a later attempt issued the key first, however late it reaches the command", async () => {
    const store = new InMemoryEventStore();
    const clock = new ManualClock('2026-11-23T00:00:00Z');
    const config = { allowLocalWebhooks: true, secretBox: new SecretBox(randomBytes(32)) } as MerchantsConfig;
    const row = { merchant_id: 'mer', revision: 0 } as MerchantSettingsRow;
    const reader = { getAtLeast: async () => row } as unknown as SettingsReader;
    const commands = merchantCommands(store, config, reader, clock);
    const input = {
      name: 'Acme',
      mode: 'test' as const,
      settlementMode: 'crypto' as const,
      commandId: 'k-1',
    };
    // The stale attempt claimed the key first; its claim ran out and the retry took it over and created the merchant.
    const staleClaim = clock.now();
    clock.advance(10 * 60 * 1000 + 1);
    await commands.createMerchant({ ...input, attemptStartedAt: clock.now() });
    const answered = await store.readAll();
    // The stale attempt reaches its command only now, after the key the retry answered was issued.
    clock.advance(60_000);

    await expect(commands.createMerchant({ ...input, attemptStartedAt: staleClaim })).rejects.toThrow(
      expect.objectContaining({ status: 409, code: 'merchant_exists' }),
    );
    expect(await store.readAll()).toEqual(answered);
  });
});
