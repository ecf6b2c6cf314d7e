import { type DynamicModule, Module } from '@nestjs/common';
import { API_KEY_RESOLVER } from '@stablepay/http';
import { MERCHANTS_ADMIN_TOKEN, MerchantsApiModule } from '@stablepay/merchants-api';
import { MerchantApiKeyResolver } from './api-key.resolver';
import { SetBetaFeaturesHandler } from './commands/set-beta-features/set-beta-features.handler';
import { ConfigureSettlementHandler } from './commands/configure-settlement/configure-settlement.handler';
import { CreateMerchantHandler } from './commands/create-merchant/create-merchant.handler';
import { DeclarePauserHandler } from './commands/declare-pauser/declare-pauser.handler';
import { RegisterSignerHandler } from './commands/register-signer/register-signer.handler';
import { RotateWebhookSecretHandler } from './commands/rotate-webhook-secret/rotate-webhook-secret.handler';
import { UpdateProfileHandler } from './commands/update-profile/update-profile.handler';
import { UpdateSettlementAddressHandler } from './commands/update-settlement-address/update-settlement-address.handler';
import { ContractSignatureVerifier } from './contract-signatures';
import { RegistryEpochs } from './chain-registration/registry-epochs';
import { MerchantCommands } from './merchant-commands';
import { MerchantSettingsProjection } from './merchant-settings.projection';
import { MerchantsGateway } from './merchants.gateway';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import { SettingsReader } from './settings.reader';
import { SettlementAddressHistoryRepair } from './settlement-address-history-repair';
import { WebhookSecrets } from './webhook-secrets';

const HANDLERS = [
  CreateMerchantHandler,
  RegisterSignerHandler,
  UpdateSettlementAddressHandler,
  UpdateProfileHandler,
  RotateWebhookSecretHandler,
  DeclarePauserHandler,
  ConfigureSettlementHandler,
  SetBetaFeaturesHandler,
];

/**
 * The merchant aggregate's service: its use-case handlers and command side, the settings projection and the
 * API-key resolver. Hosted by the gateway (merchant settings have no service of their own); its HTTP routes are
 * the merchants api lib's (merchantsHttpModule).
 */
@Module({})
export class MerchantsModule {
  static forRoot(config: MerchantsConfig): DynamicModule {
    return {
      module: MerchantsModule,
      providers: [
        { provide: MERCHANTS_CONFIG, useValue: config },
        { provide: MERCHANTS_ADMIN_TOKEN, useValue: config.adminToken },
        {
          provide: ContractSignatureVerifier,
          useFactory: () => new ContractSignatureVerifier(config.chainRpcUrls, config.chainMode),
        },
        {
          provide: RegistryEpochs,
          useFactory: () => new RegistryEpochs(config.chainRpcUrls, config.registryAddress),
        },
        MerchantSettingsProjection,
        SettlementAddressHistoryRepair,
        SettingsReader,
        MerchantCommands,
        WebhookSecrets,
        ...HANDLERS,
        { provide: API_KEY_RESOLVER, useClass: MerchantApiKeyResolver },
      ],
      exports: [
        API_KEY_RESOLVER,
        RegistryEpochs,
        SettingsReader,
        MerchantCommands,
        WebhookSecrets,
        MERCHANTS_CONFIG,
        MERCHANTS_ADMIN_TOKEN,
        ...HANDLERS,
      ],
    };
  }
}

/**
 * The gateway's merchant routes (libs/merchants/api: settings, settlement, operator API) over the merchant
 * service it hosts: MerchantsGateway calls the use-case handlers and reads the settings read model.
 */
export function merchantsHttpModule(config: MerchantsConfig): DynamicModule {
  return MerchantsApiModule.forRoot({
    imports: [MerchantsModule.forRoot(config)],
    useCases: MerchantsGateway,
  });
}
