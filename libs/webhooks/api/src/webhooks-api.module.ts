import { type DynamicModule, Module, type ModuleMetadata } from '@nestjs/common';
import { WebhookEventsController } from './webhook-events.controller';
import { WebhookTestController } from './webhook-test.controller';

/**
 * The gateway-side webhook routes. The controllers depend only on the domain's ports (WEBHOOK_EVENT_LOG,
 * WEBHOOK_TESTER); the composition root passes the module that provides them (WebhooksGatewayModule from the
 * webhooks service), so this lib needs no service import.
 */
@Module({})
export class WebhooksApiModule {
  static forRoot(options: { readonly imports: NonNullable<ModuleMetadata['imports']> }): DynamicModule {
    return {
      module: WebhooksApiModule,
      imports: options.imports,
      controllers: [WebhookEventsController, WebhookTestController],
    };
  }
}
