import { type DynamicModule, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { EVENT_STORE } from '@stablepay/aggregate';
import { commandsConfigFromEnv } from '@stablepay/commands';
import { type BusMessage, topicForCategory } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import { ApiKeyGuard } from '@stablepay/http';
import {
  MERCHANTS_MIGRATIONS,
  MerchantCommands,
  merchantsHttpModule,
  merchantsConfigFromEnv,
} from '@stablepay/merchants-service';
import { type RunningService, startService } from '@stablepay/runtime';
import type { HostResolver } from '@stablepay/node-util';
import type { ManualClock } from '@stablepay/util';
import { WEBHOOK_EVENT_TYPES } from '@stablepay/webhooks-domain';
import type { DispatchOverrides } from '../dispatch.config';
import type { ResolveAll } from '../http/egress-policy';
import { type WebhookSource, webhookEventDraft } from '../sources';
import { webhookDispatchService, webhooksHttpModule } from '../webhook-dispatch.module';
import { WebhookDispatcher } from '../webhook-dispatcher';
import { WebhookEventRecorder } from '../webhook-event.recorder';
import { WebhookEventStore } from '../webhook-event.store';

/** One fixed key per test run, so a restarted stack opens the secrets the first one sealed. */
export const TEST_ENCRYPTION_KEY = 'ab'.repeat(32);

/** Test domain events live on an existing topic (the store-log bus accepts registered topics only). */
export const TEST_CATEGORY = 'charge';
export const TEST_TOPIC = topicForCategory(TEST_CATEGORY);

export interface TestChargeData {
  readonly chargeId: string;
  readonly amount: string;
}

/**
 * A source as another scope would write one: `TestChargeSucceeded.v1` -> `subscription.charge_succeeded` (and
 * `TestSettled.v1` -> two webhook events, to prove one domain event may yield several); other types -> none.
 */
export function testSource(options: { isReadable?: WebhookSource['isReadable'] } = {}): WebhookSource {
  return {
    name: 'test-charges',
    topic: TEST_TOPIC,
    toWebhookEvents: (message: BusMessage) => {
      const data = message.data as TestChargeData;
      const charge = {
        object: 'subscription_charge',
        id: data.chargeId,
        amount: data.amount,
        status: 'succeeded',
      };
      if (message.type === 'TestChargeSucceeded.v1') {
        return [
          webhookEventDraft(message, 'subscription.charge_succeeded', {
            object: { object: 'subscription', id: '0xsub', amount: data.amount },
            charge,
          }),
        ];
      }
      if (message.type === 'TestSettled.v1') {
        return [
          webhookEventDraft(message, 'subscription.charge_settled', {
            object: { subscription_id: '0xsub', amount: data.amount },
          }),
          webhookEventDraft(message, 'payment.settled', { object: { id: data.chargeId, object: 'payment' } }),
        ];
      }
      if (message.type === 'TestBroken.v1') throw new Error('mapping bug');
      return [];
    },
    ...(options.isReadable ? { isReadable: options.isReadable } : {}),
  };
}

export interface WebhookStackOptions {
  readonly databaseUrl: string;
  readonly clock: ManualClock;
  readonly sources?: readonly WebhookSource[];
  readonly dispatch?: DispatchOverrides;
  readonly resolveAll?: ResolveAll;
  readonly allowLocalWebhooks?: boolean;
  /** Resolves webhook URL names at save and delivery (the merchants config's `webhookDns`); default: the system's DNS. */
  readonly webhookDns?: HostResolver;
  /** COMMAND_TIMEOUT_MS of the in-process commands (the gateway's wait for webhook-dispatch); default 10 s. */
  readonly commandTimeoutMs?: number;
}

export interface WebhookStack {
  readonly url: string;
  readonly service: RunningService;
  readonly commands: MerchantCommands;
  readonly dispatcher: WebhookDispatcher;
  readonly recorder: WebhookEventRecorder;
  readonly events: WebhookEventStore;
  readonly eventStore: EventStore;
  createMerchant(name?: string): Promise<{ merchantId: string; apiKey: string }>;
  /** Sets the webhook URL (and selection); returns the secret when this issued it. */
  configureWebhook(
    merchantId: string,
    url: string | null,
    eventTypes?: string[] | null,
  ): Promise<string | undefined>;
  /** Appends a synthetic domain event for the merchant to `charge-<chargeId>`; returns its stored id. */
  emit(merchantId: string, type: string, data: TestChargeData): Promise<string>;
  /** Waits until everything emitted is recorded, then delivers everything due now. */
  settle(): Promise<void>;
  api(
    method: string,
    path: string,
    apiKey: string,
    body?: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> }>;
  stop(): Promise<void>;
}

@Module({})
class TestGatewayModule {}

/**
 * The webhook slice as the embedded launcher composes it, with a ManualClock: the merchants module (settings,
 * secrets, API keys), the webhook-dispatch service with the given sources, and the gateway's webhook routes
 * behind the API-key guard.
 */
export async function startWebhookStack(options: WebhookStackOptions): Promise<WebhookStack> {
  const merchants = {
    ...merchantsConfigFromEnv(
      {
        WEBHOOK_SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
        ALLOW_LOCAL_WEBHOOKS: options.allowLocalWebhooks === false ? 'false' : 'true',
      },
      { allowEphemeralKey: false },
    ),
    webhookEventCatalogue: WEBHOOK_EVENT_TYPES,
    ...(options.webhookDns ? { webhookDns: options.webhookDns } : {}),
  };
  const shared = {
    merchants,
    ...(options.dispatch ? { dispatch: options.dispatch } : {}),
    ...(options.resolveAll ? { resolveAll: options.resolveAll } : {}),
  };
  const gateway: DynamicModule = {
    module: TestGatewayModule,
    imports: [merchantsHttpModule(merchants), webhooksHttpModule()],
    providers: [{ provide: APP_GUARD, useClass: ApiKeyGuard }],
  };
  const service = await startService(
    {
      databaseUrl: options.databaseUrl,
      eventStore: 'postgres',
      eventBus: 'store-log',
      port: 0,
      host: '127.0.0.1',
      ...(options.commandTimeoutMs !== undefined
        ? {
            commands: commandsConfigFromEnv(
              { COMMAND_TIMEOUT_MS: String(options.commandTimeoutMs) },
              { transport: 'in-process' },
            ),
          }
        : {}),
      logLevel: (process.env['WEBHOOK_TEST_LOG_LEVEL'] as 'warn' | undefined) ?? 'fatal',
    },
    [
      { name: 'gateway', imports: [gateway], migrations: MERCHANTS_MIGRATIONS },
      webhookDispatchService({ ...shared, sources: options.sources ?? [testSource()] }),
    ],
    { clock: options.clock, service: 'webhooks-test' },
  );
  const commands = service.app.get(MerchantCommands);
  const dispatcher = service.app.get(WebhookDispatcher);
  const recorder = service.app.get(WebhookEventRecorder);
  const eventStore = service.app.get<EventStore>(EVENT_STORE);
  return {
    url: service.url,
    service,
    commands,
    dispatcher,
    recorder,
    events: service.app.get(WebhookEventStore),
    eventStore,
    createMerchant: async (name = 'Acme') => {
      const created = await commands.createMerchant({ name, mode: 'test', settlementMode: 'crypto' });
      return { merchantId: created.row.merchant_id, apiKey: created.apiKey };
    },
    configureWebhook: async (merchantId, url, eventTypes) => {
      const { issuedSecret } = await commands.updateProfile(merchantId, {
        webhookUrl: url,
        ...(eventTypes !== undefined ? { webhookEventTypes: eventTypes } : {}),
      });
      return issuedSecret;
    },
    emit: async (merchantId, type, data) => {
      const id = randomUUID();
      await eventStore.appendToStream(`${TEST_CATEGORY}-${data.chargeId}`, [
        {
          id,
          type,
          data,
          metadata: { merchantId, mode: 'test', occurredAt: options.clock.now().toISOString() },
        },
      ]);
      return id;
    },
    settle: async () => {
      await recorder.caughtUp();
      await dispatcher.drain();
    },
    api: async (method, path, apiKey, body) => {
      const res = await fetch(`${service.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
    },
    stop: () => service.stop(),
  };
}
