import { type DynamicModule, Module } from '@nestjs/common';
import { API_KEY_RESOLVER } from '@stablepay/http';
import { AdminController, AdminTokenGuard } from './admin.controller';
import { MerchantApiKeyResolver } from './api-key.resolver';
import { ContractSignatureVerifier } from './contract-signatures';
import { MerchantCommands } from './merchant-commands';
import { MerchantSettingsProjection } from './merchant-settings.projection';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import { SettingsController } from './settings.controller';
import { SettlementController } from './settlement.controller';
import { SettingsReader } from './settings.reader';
import { WebhookSecrets } from './webhook-secrets';

/**
 * The merchant aggregate's service: commands, the settings projection, the API-key resolver and the settings
 * and operator HTTP routes. Hosted by the gateway (merchant settings have no service of their own).
 */
@Module({})
export class MerchantsModule {
  static forRoot(config: MerchantsConfig): DynamicModule {
    return {
      module: MerchantsModule,
      controllers: [SettingsController, SettlementController, AdminController],
      providers: [
        { provide: MERCHANTS_CONFIG, useValue: config },
        {
          provide: ContractSignatureVerifier,
          useFactory: () => new ContractSignatureVerifier(config.chainRpcUrls),
        },
        MerchantSettingsProjection,
        SettingsReader,
        MerchantCommands,
        WebhookSecrets,
        AdminTokenGuard,
        { provide: API_KEY_RESOLVER, useClass: MerchantApiKeyResolver },
      ],
      exports: [API_KEY_RESOLVER, SettingsReader, MerchantCommands, WebhookSecrets, MERCHANTS_CONFIG],
    };
  }
}
