import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { CommandClient } from '@stablepay/commands';
import type { Mode } from '@stablepay/event-store';
import type { AuthenticatedMerchant } from '@stablepay/http';
import {
  type ChangeMerchantOnChainCommand,
  type ChangeMerchantOnChainResult,
  type BetaFeaturesResource,
  type CreatedMerchantResource,
  MERCHANT_CHAIN_COMMANDS,
  type MerchantChangeInput,
  type MerchantsUseCases,
  type PauserDeclarationInput,
  type PauserDeclarationResource,
  type ProfilePatch,
  type RevocationInput,
  type RevokeAuthorizationsCommand,
  type RevokeAuthorizationsResult,
  type SettingsResource,
  type SettlementConfigurationResource,
  type SettlementInput,
  type UpdatedSettingsResource,
  type WebhookSecretResource,
} from '@stablepay/merchants-api';
import { pauserDeclarationMessage, type SettlementMode } from '@stablepay/merchants-domain';
import { ConfigureSettlementHandler } from './commands/configure-settlement/configure-settlement.handler';
import { CreateMerchantHandler } from './commands/create-merchant/create-merchant.handler';
import { DeclarePauserHandler } from './commands/declare-pauser/declare-pauser.handler';
import { RegisterSignerHandler } from './commands/register-signer/register-signer.handler';
import { RotateWebhookSecretHandler } from './commands/rotate-webhook-secret/rotate-webhook-secret.handler';
import { UpdateProfileHandler } from './commands/update-profile/update-profile.handler';
import { UpdateSettlementAddressHandler } from './commands/update-settlement-address/update-settlement-address.handler';
import { SetBetaFeaturesHandler } from './commands/set-beta-features/set-beta-features.handler';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import { RegistrationStore } from './chain-registration/registration.store';
import { RegistryEpochs } from './chain-registration/registry-epochs';
import { chainsWithRegistration, presentSettings } from './settings.presenter';
import { SettingsReader, type MerchantSettingsRow } from './settings.reader';
import { presentSettlement } from './settlement.presenter';

/**
 * The gateway's side of the merchants use cases (the port its controllers call). The gateway owns the merchant
 * aggregate, so the use-case handlers run in this process and are called directly rather than through the
 * CommandClient (docs/architecture.md, "Gateway route -> use case": why the owner-is-gateway case differs); as
 * in every scope, a handler answers `{ id, revision }` and the read model is awaited at that revision.
 */
@Injectable()
export class MerchantsGateway implements MerchantsUseCases {
  private readonly registrations: RegistrationStore;

  constructor(
    @Inject(DataSource) dataSource: DataSource,
    @Inject(CommandClient) private readonly commands: CommandClient,
    @Inject(SettingsReader) private readonly reader: SettingsReader,
    @Inject(MERCHANTS_CONFIG) private readonly config: MerchantsConfig,
    @Inject(CreateMerchantHandler) private readonly createMerchantHandler: CreateMerchantHandler,
    @Inject(RegisterSignerHandler) private readonly registerSignerHandler: RegisterSignerHandler,
    @Inject(UpdateSettlementAddressHandler)
    private readonly updateSettlementAddressHandler: UpdateSettlementAddressHandler,
    @Inject(UpdateProfileHandler) private readonly updateProfileHandler: UpdateProfileHandler,
    @Inject(RotateWebhookSecretHandler)
    private readonly rotateWebhookSecretHandler: RotateWebhookSecretHandler,
    @Inject(DeclarePauserHandler) private readonly declarePauserHandler: DeclarePauserHandler,
    @Inject(ConfigureSettlementHandler)
    private readonly configureSettlementHandler: ConfigureSettlementHandler,
    @Inject(SetBetaFeaturesHandler) private readonly setBetaFeaturesHandler: SetBetaFeaturesHandler,
    @Inject(RegistryEpochs) private readonly epochs: RegistryEpochs,
  ) {
    this.registrations = new RegistrationStore(dataSource);
  }

  /**
   * The settings with where the merchant stands on each chain (the registration worker's rows) and its current
   * epoch in each registry that may hold it (read from the chain: what the next merchant signature must name).
   */
  private async present(row: MerchantSettingsRow): Promise<SettingsResource> {
    const registrations = await this.registrations.forMerchant(row.merchant_id);
    const epochs = await this.epochs.read(
      row.merchant_id,
      chainsWithRegistration(row, this.config, registrations),
    );
    return presentSettings(row, this.config, registrations, epochs);
  }

  async settings(merchant: AuthenticatedMerchant): Promise<SettingsResource> {
    return this.present(await this.reader.get(merchant.merchantId));
  }

  async registerSigner(
    merchant: AuthenticatedMerchant,
    merchantSigner: string,
    settlementAddress?: string,
  ): Promise<SettingsResource> {
    const done = await this.registerSignerHandler.handle({
      merchant,
      merchantSigner,
      ...(settlementAddress !== undefined ? { settlementAddress } : {}),
    });
    return this.present(await this.reader.getAtLeast(done.id, done.revision));
  }

  async updateSettlementAddress(
    merchant: AuthenticatedMerchant,
    settlementAddress: string,
  ): Promise<SettingsResource> {
    const done = await this.updateSettlementAddressHandler.handle({ merchant, settlementAddress });
    return this.present(await this.reader.getAtLeast(done.id, done.revision));
  }

  /**
   * The change needs the operator key, which the gateway does not hold: a command to the process that does (the
   * payments service), which preflights, relays and records the fact before answering.
   */
  async changeMerchantOnChain(
    merchant: AuthenticatedMerchant,
    input: MerchantChangeInput,
  ): Promise<SettingsResource> {
    const command: ChangeMerchantOnChainCommand = { merchant, ...input };
    const done = await this.commands.send<ChangeMerchantOnChainResult>(
      'payments',
      MERCHANT_CHAIN_COMMANDS.changeMerchant,
      command,
    );
    return this.present(await this.reader.getAtLeast(done.id, done.revision));
  }

  /** Like the merchant change: the revocation is relayed by the process holding the operator key. */
  revokeAuthorizations(
    merchant: AuthenticatedMerchant,
    revocations: readonly RevocationInput[],
  ): Promise<RevokeAuthorizationsResult> {
    const command: RevokeAuthorizationsCommand = { merchant, revocations };
    return this.commands.send<RevokeAuthorizationsResult>(
      'payments',
      MERCHANT_CHAIN_COMMANDS.revokeAuthorizations,
      command,
    );
  }

  async updateProfile(
    merchant: AuthenticatedMerchant,
    patch: ProfilePatch,
  ): Promise<UpdatedSettingsResource> {
    const done = await this.updateProfileHandler.handle({ merchant, ...patch });
    const row = await this.reader.getAtLeast(done.id, done.revision);
    // The secret is shown once, in the response of the update that issued it.
    return {
      ...(await this.present(row)),
      ...(done.issuedSecret ? { webhook_secret: done.issuedSecret } : {}),
    };
  }

  async rotateWebhookSecret(
    merchant: AuthenticatedMerchant,
    commandId?: string,
  ): Promise<WebhookSecretResource> {
    // The handler has awaited the read model at its revision (read-your-writes); the answer is its own rotation,
    // not the row, which a concurrent rotation may already have moved on.
    const done = await this.rotateWebhookSecretHandler.handle({
      merchant,
      ...(commandId !== undefined ? { commandId } : {}),
    });
    return {
      object: 'webhook_secret' as const,
      webhook_secret: done.secret,
      previous_secret_expires_at: done.previousSecretExpiresAt.toISOString(),
    };
  }

  async pauser(merchant: AuthenticatedMerchant): Promise<PauserDeclarationResource> {
    return presentPauser(merchant, await this.reader.get(merchant.merchantId));
  }

  async declarePauser(
    merchant: AuthenticatedMerchant,
    input: PauserDeclarationInput,
  ): Promise<PauserDeclarationResource> {
    const done = await this.declarePauserHandler.handle({ merchant, ...input });
    return presentPauser(merchant, await this.reader.getAtLeast(done.id, done.revision));
  }

  async settlement(merchant: AuthenticatedMerchant): Promise<SettlementConfigurationResource> {
    return presentSettlement(await this.reader.get(merchant.merchantId));
  }

  async configureSettlement(
    merchant: AuthenticatedMerchant,
    input: SettlementInput,
  ): Promise<SettlementConfigurationResource> {
    const done = await this.configureSettlementHandler.handle({ merchant, ...input });
    return presentSettlement(await this.reader.getAtLeast(done.id, done.revision));
  }

  async setBetaFeatures(
    merchantId: string,
    features: Record<string, unknown>,
  ): Promise<BetaFeaturesResource> {
    const done = await this.setBetaFeaturesHandler.handle({ merchantId, features });
    const row = await this.reader.getAtLeast(done.id, done.revision);
    return {
      object: 'merchant_beta_features',
      merchant: row.merchant_id,
      payouts: row.beta_features['payouts'] === true,
    };
  }

  async createMerchant(input: {
    name: string;
    mode: Mode;
    settlementMode: SettlementMode;
    commandId?: string;
    attemptStartedAt?: string;
  }): Promise<CreatedMerchantResource> {
    const done = await this.createMerchantHandler.handle(input);
    const row = await this.reader.getAtLeast(done.id, done.revision);
    return {
      object: 'merchant' as const,
      id: row.merchant_id,
      name: row.name,
      mode: row.mode,
      settlement_mode: row.settlement_mode,
      api_key: done.apiKey,
      created_at: new Date(row.created_at).toISOString(),
    };
  }
}

function presentPauser(merchant: AuthenticatedMerchant, row: MerchantSettingsRow): PauserDeclarationResource {
  return {
    object: 'pauser_declaration' as const,
    declaration_message: pauserDeclarationMessage(merchant.merchantId, merchant.mode),
    merchant_pauser: row.merchant_pauser,
    shared_pauser_risk_acknowledged: row.shared_pauser_risk_acknowledged,
    locked: row.subscription_manager_address !== null,
  };
}
