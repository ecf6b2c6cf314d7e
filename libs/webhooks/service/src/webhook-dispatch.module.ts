import { type DynamicModule, Module, type OnApplicationShutdown, type Provider } from '@nestjs/common';
import { MERCHANTS_CONFIG, type MerchantsConfig, WebhookSecrets } from '@stablepay/merchants-service';
import type { ServiceDefinition } from '@stablepay/runtime';
import { WebhooksApiModule } from '@stablepay/webhooks-api';
import {
  DISPATCH_OPTIONS,
  dispatchOptions,
  type DispatchOptions,
  type DispatchOverrides,
} from './dispatch.config';
import type { ResolveAll } from './http/egress-policy';
import { WebhookHttpSender } from './http/webhook-http-sender';
import { MerchantEndpoints } from './merchant-endpoints';
import { RedeliverWebhookEventHandler } from './commands/redeliver-webhook-event/redeliver-webhook-event.handler';
import { SendTestWebhookHandler } from './commands/send-test-webhook/send-test-webhook.handler';
import { WebhookEventsGateway } from './webhook-events.gateway';
import { WEBHOOKS_MIGRATIONS } from './migrations';
import { type WebhookSource, WebhookSourceRegistry } from './sources';
import { WEBHOOK_SOURCES } from './tokens';
import { WebhookDispatcher } from './webhook-dispatcher';
import { WebhookEventRecorder } from './webhook-event.recorder';
import { WebhookEventStore } from './webhook-event.store';

export interface WebhookModuleOptions {
  /** The merchants scope's configuration: the secret box that opens webhook secrets and ALLOW_LOCAL_WEBHOOKS. */
  readonly merchants: MerchantsConfig;
  /** Dispatcher tuning; defaults are production's (SPEC policy, 10-second deadline). */
  readonly dispatch?: DispatchOverrides;
  /** DNS answers for the egress policy (tests only); otherwise the merchants config's `webhookDns`. */
  readonly resolveAll?: ResolveAll;
}

export interface WebhookDispatchModuleOptions extends WebhookModuleOptions {
  /** The source registry: each scope's mapping from its domain events to webhook events. */
  readonly sources: readonly WebhookSource[];
}

/** The HTTP client with its keep-alive agents, closed with the application. */
class ManagedWebhookHttpSender extends WebhookHttpSender implements OnApplicationShutdown {
  onApplicationShutdown(): void {
    this.close();
  }
}

function sharedProviders(options: WebhookModuleOptions, resolved: DispatchOptions): Provider[] {
  return [
    { provide: MERCHANTS_CONFIG, useValue: options.merchants },
    { provide: DISPATCH_OPTIONS, useValue: resolved },
    WebhookSecrets,
    MerchantEndpoints,
    WebhookEventStore,
    {
      provide: WebhookHttpSender,
      useFactory: () =>
        new ManagedWebhookHttpSender({
          allowLoopback: options.merchants.allowLocalWebhooks,
          maxResponseBytes: resolved.maxResponseBytes,
          excerptBytes: resolved.responseExcerptBytes,
          resolveAll: options.resolveAll ?? ((hostname) => options.merchants.webhookDns.resolve(hostname)),
        }),
    },
  ];
}

/**
 * The webhook-dispatch service: records merchant webhook events from the registered sources and delivers them
 * (signed, retried on the SPEC schedule, durable across restarts, fair across merchants); answers the gateway's
 * redelivery and test-delivery commands (one handler per use case).
 */
@Module({})
export class WebhookDispatchServiceModule {
  static forRoot(options: WebhookDispatchModuleOptions): DynamicModule {
    const resolved = dispatchOptions(options.dispatch);
    return {
      module: WebhookDispatchServiceModule,
      controllers: [RedeliverWebhookEventHandler, SendTestWebhookHandler],
      providers: [
        ...sharedProviders(options, resolved),
        { provide: WEBHOOK_SOURCES, useValue: new WebhookSourceRegistry(options.sources) },
        WebhookDispatcher,
        WebhookEventRecorder,
      ],
      exports: [WebhookDispatcher, WebhookEventRecorder, WebhookEventStore],
    };
  }
}

/** What the gateway's webhook routes read in the gateway process: the event log. */
@Module({ providers: [WebhookEventStore], exports: [WebhookEventStore] })
export class WebhooksGatewayModule {}

/**
 * The gateway's webhook routes (libs/webhooks/api): the event log read in the gateway, redelivery and test
 * deliveries sent to the webhook-dispatch service (WebhookEventsGateway).
 */
export function webhooksHttpModule(): DynamicModule {
  return WebhooksApiModule.forRoot({ imports: [WebhooksGatewayModule], useCases: WebhookEventsGateway });
}

export function webhookDispatchService(options: WebhookDispatchModuleOptions): ServiceDefinition {
  return {
    name: 'webhook-dispatch',
    imports: [WebhookDispatchServiceModule.forRoot(options)],
    migrations: WEBHOOKS_MIGRATIONS,
    handlesCommands: true,
    upcasters: options.sources.flatMap((source) => source.upcasters ?? []),
  };
}
