import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { WebhookEventsController } from './webhook-events.controller';
import { WEBHOOK_EVENTS, type WebhookEventsUseCases } from './webhook-events.port';
import { WebhookTestController } from './webhook-test.controller';

/**
 * The webhooks scope's HTTP surface in the gateway: the event log, manual redelivery and test deliveries. The
 * use cases are supplied by whoever composes it (see webhooksHttpModule in @stablepay/webhook-dispatch-service).
 */
@Module({})
export class WebhooksApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<WebhookEventsUseCases>;
  }): DynamicModule {
    return {
      module: WebhooksApiModule,
      imports: options.imports,
      controllers: [WebhookEventsController, WebhookTestController],
      providers: [{ provide: WEBHOOK_EVENTS, useClass: options.useCases }],
    };
  }
}
