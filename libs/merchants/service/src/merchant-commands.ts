import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { verifyMessage } from 'ethers';
import { randomBytes } from 'node:crypto';
import { CLOCK, handleCommand } from '@stablepay/aggregate';
import { computeSubscriptionManagerAddress, toOnChainId } from '@stablepay/contracts';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore, Mode } from '@stablepay/event-store';
import { parseAddress } from '@stablepay/evm';
import { apiKeyHint, generateApiKey, hashApiKey, parseApiKey } from '@stablepay/http';
import {
  type FiatSettlementDetails,
  type MerchantCommand,
  type MerchantEvent,
  merchantDecider,
  merchantStreamId,
  pauserDeclarationMessage,
  type SettlementMode,
} from '@stablepay/merchants-domain';
import {
  type Clock,
  derivedId,
  DomainError,
  fingerprint,
  invalidRequest,
  newId,
  validationError,
} from '@stablepay/util';
import { ContractSignatureVerifier } from './contract-signatures';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import { SettingsReader, type MerchantSettingsRow } from './settings.reader';
import { validateWebhookUrl } from './webhook-url';
import { WebhookSecrets } from './webhook-secrets';

/** `whsec_` + 32 random bytes base64url: the secret as issued, used verbatim as the HMAC key. */
function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export interface CreatedMerchant {
  readonly row: MerchantSettingsRow;
  readonly apiKey: string;
}

/** The command side of the merchant aggregate: load, decide, append; then wait for the read model. */
@Injectable()
export class MerchantCommands {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(MERCHANTS_CONFIG) private readonly config: MerchantsConfig,
    @Inject(SettingsReader) private readonly reader: SettingsReader,
    @Inject(ContractSignatureVerifier) private readonly contractSignatures: ContractSignatureVerifier,
    @Inject(WebhookSecrets) private readonly webhookSecrets: WebhookSecrets,
  ) {}

  /**
   * A merchant signer or settlement address: an account the merchant controls. Neither the zero address nor a
   * known contract (a stablecoin, a Stablepay contract): the chain would send every settlement there, where it
   * stays, and no contract signs a capture, a charge or a MerchantChange, so such a signer could never be replaced
   * by the merchant.
   */
  private async accountAddress(
    merchantId: string,
    value: string,
    param: 'merchant_signer' | 'settlement_address',
  ): Promise<string> {
    const address = parseAddress(value, param, { nonZero: true });
    const contract =
      this.config.knownContracts.get(address.toLowerCase()) ??
      (await this.subscriptionManagerNamed(merchantId, address)) ??
      (await this.futureSubscriptionManager(merchantId, address));
    if (contract !== undefined)
      throw validationError(
        param,
        param === 'merchant_signer'
          ? `merchant_signer must be a key you hold, not ${contract} (${address}): a contract signs nothing.`
          : `settlement_address must be an account you control, not ${contract} (${address}): what it is sent stays there.`,
        'invalid_address',
      );
    return address;
  }

  /**
   * A merchant's deployed SubscriptionManager (the merchant's own, shown beside the settlement address in GET
   * /settings, or another's): a contract that keeps what it is sent and signs nothing, as the known contracts.
   */
  private async subscriptionManagerNamed(merchantId: string, address: string): Promise<string | undefined> {
    const rows: Array<{ merchant_id: string }> = await this.dataSource.query(
      'SELECT merchant_id FROM merchant_settings WHERE lower(subscription_manager_address) = $1 LIMIT 1',
      [address.toLowerCase()],
    );
    const owner = rows[0]?.merchant_id;
    if (owner === undefined) return undefined;
    return owner === merchantId
      ? 'your own subscription manager contract'
      : "a Stablepay merchant's subscription manager contract";
  }

  /**
   * The merchant's own manager before it is deployed: its CREATE2 address is fixed by the declared pauser, and the
   * first subscribe deploys it there, after which it keeps what it is sent and signs nothing like the deployed one.
   */
  private async futureSubscriptionManager(merchantId: string, address: string): Promise<string | undefined> {
    const { subscriptionManagerFactoryAddress: factory, registryAddress: registry } = this.config;
    if (!factory || !registry) return undefined;
    const pauser = (await this.reader.find(merchantId))?.merchant_pauser;
    if (!pauser) return undefined;
    const manager = computeSubscriptionManagerAddress(factory, registry, toOnChainId(merchantId), pauser);
    return manager.toLowerCase() === address.toLowerCase()
      ? 'your own subscription manager contract (the address its deployment will have)'
      : undefined;
  }

  private async run(merchantId: string, command: MerchantCommand, mode?: Mode): Promise<MerchantSettingsRow> {
    return (await this.execute(merchantId, command, mode)).row;
  }

  /**
   * The command's own events beside the read model at (at least) its revision. The row may already hold a later
   * command's changes (another request on the same merchant appended right after), so what this command did is
   * read from its events, never from the row.
   */
  private async execute(
    merchantId: string,
    command: MerchantCommand,
    mode?: Mode,
    idempotencyKey?: string,
  ): Promise<{ row: MerchantSettingsRow; events: readonly MerchantEvent[] }> {
    const result = await handleCommand(this.store, merchantStreamId(merchantId), merchantDecider, command, {
      ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
      metadata: { merchantId, ...(mode ? { mode } : {}), occurredAt: this.clock.now().toISOString() },
    });
    return { row: await this.reader.getAtLeast(merchantId, result.revision), events: result.newEvents };
  }

  /**
   * With a command id (the Idempotency-Key's) the merchant's id derives from it, so a retry whose first attempt
   * created the merchant but lost its answer finds that merchant instead of creating a second. The first attempt's
   * API key reached nobody and only its hash is stored: the retry issues another in its place
   * (MerchantApiKeyReissued), which is the one it answers.
   */
  async createMerchant(input: {
    name: string;
    mode: Mode;
    settlementMode: SettlementMode;
    apiKey?: string;
    commandId?: string;
    /** When the Idempotency-Key was claimed for this attempt; default now (an attempt without a claim). */
    attemptStartedAt?: Date;
  }): Promise<CreatedMerchant> {
    const apiKey = input.apiKey ?? generateApiKey(input.mode);
    const parsed = parseApiKey(apiKey);
    if (!parsed || parsed.mode !== input.mode)
      throw validationError('api_key', `api_key must be an sk_${input.mode}_ key.`);
    const now = this.clock.now();
    const merchantId =
      input.commandId === undefined
        ? newId('mer', now)
        : derivedId(
            'mer',
            [input.commandId, input.name, input.mode, input.settlementMode, 'create-merchant'].join('\u0000'),
          );
    const key = { apiKeyHash: hashApiKey(apiKey), apiKeyHint: apiKeyHint(apiKey), now };
    try {
      const row = await this.run(
        merchantId,
        {
          type: 'CreateMerchant',
          merchantId,
          name: input.name,
          mode: input.mode,
          settlementMode: input.settlementMode,
          ...key,
        },
        input.mode,
      );
      return { row, apiKey };
    } catch (error) {
      if (!(
        input.commandId !== undefined &&
        error instanceof DomainError &&
        error.code === 'merchant_exists'
      ))
        throw error;
      return {
        row: await this.run(
          merchantId,
          {
            type: 'ReissueApiKey',
            ...key,
            // The claim's time, not this call's: the attempt may reach here after a later attempt took its claim
            // over (the lease ran out) and issued the key that attempt answered.
            attemptStartedAt: input.attemptStartedAt ?? now,
            now: this.clock.now(),
          },
          input.mode,
        ),
        apiKey,
      };
    }
  }

  async registerSigner(
    merchantId: string,
    merchantSigner: string,
    settlementAddress?: string,
  ): Promise<MerchantSettingsRow> {
    return this.run(merchantId, {
      type: 'RegisterSigner',
      merchantSigner: await this.accountAddress(merchantId, merchantSigner, 'merchant_signer'),
      ...(settlementAddress !== undefined
        ? {
            settlementAddress: await this.accountAddress(merchantId, settlementAddress, 'settlement_address'),
          }
        : {}),
      now: this.clock.now(),
    });
  }

  async updateSettlementAddress(merchantId: string, settlementAddress: string): Promise<MerchantSettingsRow> {
    return this.run(merchantId, {
      type: 'UpdateSettlementAddress',
      settlementAddress: await this.accountAddress(merchantId, settlementAddress, 'settlement_address'),
      now: this.clock.now(),
    });
  }

  /** Returns the row and, when this update issued the first secret, the secret itself (shown once). */
  async updateProfile(
    merchantId: string,
    patch: {
      displayName?: string;
      webhookUrl?: string | null;
      backgroundColor?: string | null;
      primaryColor?: string | null;
      webhookEventTypes?: string[] | null;
    },
  ): Promise<{ row: MerchantSettingsRow; issuedSecret?: string }> {
    const webhookUrl =
      patch.webhookUrl === undefined || patch.webhookUrl === null
        ? patch.webhookUrl
        : await validateWebhookUrl(patch.webhookUrl, this.config.allowLocalWebhooks, this.config.webhookDns);
    const before = await this.reader.get(merchantId);
    const secret = generateWebhookSecret();
    const secretId = newId('whs', this.clock.now());
    const willIssue = typeof webhookUrl === 'string' && before.webhook_secret_id === null;
    // The sealed secret is stored before the event that names it; if the append then fails, an unused row
    // remains and names nothing.
    if (willIssue) await this.storeSecret(merchantId, secretId, secret);
    const { row, events } = await this.execute(merchantId, {
      type: 'UpdateProfile',
      ...(patch.displayName !== undefined ? { displayName: patch.displayName } : {}),
      ...(webhookUrl !== undefined ? { webhookUrl } : {}),
      ...(patch.backgroundColor !== undefined ? { backgroundColor: patch.backgroundColor } : {}),
      ...(patch.primaryColor !== undefined ? { primaryColor: patch.primaryColor } : {}),
      ...(patch.webhookEventTypes !== undefined ? { webhookEventTypes: patch.webhookEventTypes } : {}),
      candidateSecret: { secretId, fingerprint: fingerprint(secret) },
      now: this.clock.now(),
    });
    // From its own events: a rotation landing right after may already have replaced the issued secret in the row.
    const issued = events.some((e) => e.type === 'WebhookSecretIssued.v1' && e.data.secretId === secretId);
    return issued ? { row, issuedSecret: secret } : { row };
  }

  /**
   * Rotations of one merchant serialize on its stream (each retried on top of the one that won), so each one
   * answers the secret it issued and the expiry its own event gave the secret it replaced.
   */
  /**
   * With a command id (the request's Idempotency-Key) the new secret's id derives from it, so a retry whose first
   * attempt rotated but never kept its answer (the process killed after the append, a 5xx after it) answers that
   * rotation's secret. Rotating again would issue a second secret and push the merchant's deployed one out of the
   * previous slot: deliveries would be signed only with two secrets the merchant may not hold.
   */
  async rotateWebhookSecret(
    merchantId: string,
    commandId?: string,
  ): Promise<{ row: MerchantSettingsRow; secret: string; previousSecretExpiresAt: Date }> {
    const before = await this.reader.get(merchantId);
    if (before.webhook_secret_id === null) {
      throw invalidRequest(
        'No webhook secret exists yet: set a webhook_url with PATCH /settings first.',
        'webhook_not_configured',
      );
    }
    const secretId =
      commandId === undefined
        ? newId('whs', this.clock.now())
        : derivedId('whs', [merchantId, commandId, 'webhook-secret-rotation'].join('\u0000'));
    if (commandId !== undefined) {
      const earlier = await this.rotationOf(merchantId, secretId);
      if (earlier) return earlier;
    }
    // A first attempt may have stored the secret and died before its append: that secret is the one to rotate to.
    const stored = commandId === undefined ? undefined : await this.storedSecret(secretId);
    const secret = stored ?? generateWebhookSecret();
    if (stored === undefined) await this.storeSecret(merchantId, secretId, secret);
    // A keyed rotation's event id derives from its secret id: an attempt that outlived its claim (it found no
    // rotation above, then its retry rotated, then perhaps another rotation) appends nothing when it lands, instead
    // of rotating back to its secret and demoting the later one.
    const { row, events } = await this.execute(
      merchantId,
      {
        type: 'RotateWebhookSecret',
        secret: { secretId, fingerprint: fingerprint(secret) },
        now: this.clock.now(),
      },
      undefined,
      commandId === undefined ? undefined : `webhook-secret-rotation\u0000${secretId}`,
    );
    const rotated = events.find((e) => e.type === 'WebhookSecretRotated.v1' && e.data.secretId === secretId);
    if (rotated?.type !== 'WebhookSecretRotated.v1') {
      const earlier = commandId === undefined ? undefined : await this.rotationOf(merchantId, secretId);
      if (earlier) return earlier;
      throw new Error(`rotation of ${merchantId} appended no WebhookSecretRotated for ${secretId}`);
    }
    return { row, secret, previousSecretExpiresAt: new Date(rotated.data.previousSecretExpiresAt) };
  }

  async declarePauser(
    merchantId: string,
    mode: Mode,
    input: { merchantPauser: string; signature: string; acknowledgeSharedPauserRisk: boolean },
  ): Promise<MerchantSettingsRow> {
    const message = pauserDeclarationMessage(merchantId, mode);
    let recoveredSigner: string | null;
    try {
      recoveredSigner = verifyMessage(message, input.signature);
    } catch {
      recoveredSigner = null;
    }
    // A contract account (multisig, smart wallet) proves control by approving the message on every chain of the
    // merchant's mode.
    const contractApproved =
      recoveredSigner?.toLowerCase() === input.merchantPauser.toLowerCase()
        ? false
        : await this.contractSignatures.approvesOnEveryChain(
            mode,
            input.merchantPauser,
            message,
            input.signature,
          );
    return this.run(merchantId, {
      type: 'DeclarePauser',
      merchantPauser: input.merchantPauser,
      recoveredSigner,
      contractApproved,
      operatorPauser: this.config.operatorPauser,
      acknowledgeSharedPauserRisk: input.acknowledgeSharedPauserRisk,
      now: this.clock.now(),
    });
  }

  /** PUT /payments/settlement: settlement address and/or fiat configuration (validated by the caller). */
  async configureSettlement(
    merchantId: string,
    input: { settlementAddress?: string; fiat?: Partial<FiatSettlementDetails> | null },
  ): Promise<MerchantSettingsRow> {
    return this.run(merchantId, {
      type: 'ConfigureSettlement',
      ...(input.settlementAddress !== undefined
        ? {
            settlementAddress: await this.accountAddress(
              merchantId,
              input.settlementAddress,
              'settlement_address',
            ),
          }
        : {}),
      ...(input.fiat !== undefined ? { fiat: input.fiat } : {}),
      now: this.clock.now(),
    });
  }

  /** Operator: turns beta features on or off (validated by the decider: known names, booleans). */
  setBetaFeatures(merchantId: string, features: Record<string, unknown>): Promise<MerchantSettingsRow> {
    return this.run(merchantId, { type: 'SetBetaFeatures', features, now: this.clock.now() });
  }

  recordSubscriptionManagerDeployed(
    merchantId: string,
    chain: string,
    address: string,
  ): Promise<MerchantSettingsRow> {
    return this.run(merchantId, {
      type: 'RecordSubscriptionManagerDeployed',
      chain,
      address,
      now: this.clock.now(),
    });
  }

  /** The rotation to `secretId` the merchant's stream already holds, answered as when it was made. */
  private async rotationOf(
    merchantId: string,
    secretId: string,
  ): Promise<{ row: MerchantSettingsRow; secret: string; previousSecretExpiresAt: Date } | undefined> {
    const events = await this.store.readStream(merchantStreamId(merchantId));
    const rotated = events.find(
      (e) => e.type === 'WebhookSecretRotated.v1' && (e.data as { secretId?: unknown }).secretId === secretId,
    );
    if (!rotated) return undefined;
    const { previousSecretExpiresAt } = rotated.data as { previousSecretExpiresAt: string };
    return {
      row: await this.reader.getAtLeast(merchantId, rotated.revision),
      secret: await this.webhookSecrets.open(secretId),
      previousSecretExpiresAt: new Date(previousSecretExpiresAt),
    };
  }

  private async storedSecret(secretId: string): Promise<string | undefined> {
    const rows: unknown[] = await this.dataSource.query(
      'SELECT 1 FROM webhook_secrets WHERE secret_id = $1',
      [secretId],
    );
    return rows.length === 0 ? undefined : this.webhookSecrets.open(secretId);
  }

  private async storeSecret(merchantId: string, secretId: string, secret: string): Promise<void> {
    await this.dataSource.query(
      'INSERT INTO webhook_secrets (secret_id, merchant_id, sealed_secret, created_at) VALUES ($1, $2, $3, $4)',
      [secretId, merchantId, this.config.secretBox.seal(secret, secretId), this.clock.now()],
    );
  }
}
