import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { CLOCK, EVENT_STORE } from '@stablepay/aggregate';
import { type EventStore, streamHistoryThrough } from '@stablepay/event-store';
import { type BusMessage, type BusSubscription, EVENT_BUS, type EventBus } from '@stablepay/event-bus';
import type { Clock } from '@stablepay/util';
import { applySelection, isEventTypeSelected, recordedDelivery } from '@stablepay/webhooks-domain';
import { MerchantEndpoints } from './merchant-endpoints';
import {
  assertValidDraft,
  type RecordedWebhookEvent,
  type RelatedHistories,
  type StreamEvent,
  type WebhookSource,
  type WebhookSourceRegistry,
} from './sources';
import { WEBHOOK_SOURCES } from './tokens';
import { WebhookDispatcher } from './webhook-dispatcher';
import { WebhookEventStore } from './webhook-event.store';

export const WEBHOOK_RECORDER_GROUP = 'webhooks.dispatcher';

/**
 * How long (wall time) a message may wait for its related streams before it is recorded without them. The recorder
 * is one consumer for every merchant: a message retried forever (the other scope never writes what it refers to,
 * e.g. its consumer parked that stream) would hold every merchant's webhooks behind it.
 */
export const RELATED_WAIT_LIMIT_MS = 120_000;

/** A message whose related streams do not yet hold what it refers to: retried like a failed read, never skipped. */
export class RelatedStreamsNotReadyError extends Error {
  /** A bounded wait (RELATED_WAIT_LIMIT_MS), not a failure: the supervised bus retries it and never parks it. */
  readonly retryable = true;

  constructor(source: string, messageId: string) {
    super(
      `webhook source ${source}: the streams message ${messageId} refers to are not written yet; retrying`,
    );
    this.name = 'RelatedStreamsNotReadyError';
  }
}

/**
 * Domain events -> webhook events. Consumes every registered source's topic in batches, lets each source map
 * each message to drafts, and records a batch's drafts, due now, in one statement. The event id is the deduplication key, so a redelivered
 * bus message records nothing twice. Whether an event is sent (SPEC rule 5: the merchant's selection, a configured
 * URL) is decided with the settings of the moment it is recorded: an event the merchant would not get (no webhook
 * URL, an unselected type) is recorded `not_selected` at once, so it never costs a claim, a settings read and a
 * write-back (the common case of a merchant without a webhook endpoint). The dispatcher applies the same rule again
 * when it first picks a pending event up (a URL removed in between).
 */
@Injectable()
export class WebhookEventRecorder implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('webhook-recorder');
  private subscription: BusSubscription | undefined;
  /** When each message first found its related streams unwritten (performance.now()), until it is recorded. */
  private readonly waitingSince = new Map<string, number>();
  /** RELATED_WAIT_LIMIT_MS; a test shortens it. */
  relatedWaitLimitMs = RELATED_WAIT_LIMIT_MS;

  constructor(
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(WEBHOOK_SOURCES) private readonly sources: WebhookSourceRegistry,
    @Inject(WebhookEventStore) private readonly store: WebhookEventStore,
    @Inject(WebhookDispatcher) private readonly dispatcher: WebhookDispatcher,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(EVENT_STORE) private readonly eventStore: EventStore,
    @Inject(MerchantEndpoints) private readonly endpoints: MerchantEndpoints,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const topics = this.sources.topics();
    if (topics.length === 0) return;
    this.subscription = await this.bus.consume({
      group: WEBHOOK_RECORDER_GROUP,
      topics,
      handler: (message) => this.handle(message),
      handleBatch: (messages) => this.handleBatch(messages),
      onError: (error, message) =>
        this.logger.error({
          msg: 'recording webhook events failed, will retry',
          messageId: message.id,
          error: String(error),
        }),
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.subscription?.stop();
  }

  /** Resolves once every message published before the call has been recorded. */
  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  async handle(message: BusMessage): Promise<void> {
    await this.handleBatch([message]);
  }

  /** A batch of bus messages -> their webhook events, recorded in ONE statement (one transaction). */
  async handleBatch(messages: readonly BusMessage[]): Promise<void> {
    const events: RecordedWebhookEvent[] = [];
    for (const message of messages) events.push(...(await this.draftsOf(message)));
    if (events.length === 0) return;
    const endpoints = await this.endpoints.cachedForMerchants(events.map((e) => e.merchantId));
    const now = this.clock.now();
    const drafts = events.map((event) => {
      const endpoint = endpoints.get(event.merchantId);
      const state = applySelection(recordedDelivery(now), {
        hasEndpoint: endpoint?.url !== null && endpoint?.url !== undefined,
        typeSelected: isEventTypeSelected(endpoint?.eventTypes ?? null, event.type),
      });
      return { event, state, recordedAt: now };
    });
    const inserted = await this.store.record(drafts);
    if (inserted > 0 && drafts.some((d) => d.state.nextAttemptAt !== null)) this.dispatcher.wake();
  }

  private async draftsOf(message: BusMessage): Promise<RecordedWebhookEvent[]> {
    const events: RecordedWebhookEvent[] = [];
    for (const source of this.sources.forTopic(message.topic)) {
      // Outside the try: a failed read is I/O, so the message is retried rather than skipped.
      const history = source.withHistory ? await this.history(message) : undefined;
      const related = await this.related(source, message, history);
      if (!this.relatedReady(source, message, history, related)) this.holdOrGiveUp(source.name, message);
      this.waitingSince.delete(message.id);
      try {
        for (const draft of source.toWebhookEvents(message, history, related)) {
          assertValidDraft(source.name, draft);
          events.push({
            ...draft,
            origin: {
              source: source.name,
              topic: message.topic,
              eventId: message.id,
              streamId: message.key,
              revision: message.revision,
            },
          });
        }
      } catch (error) {
        // A mapping bug is deterministic: retrying the message would block the topic forever. It is skipped, loudly.
        this.logger.error({
          msg: 'webhook source failed on a message; skipped',
          source: source.name,
          messageId: message.id,
          type: message.type,
          error: String(error),
        });
      }
    }
    return events;
  }

  /**
   * Retries a message whose related streams are not written yet, up to relatedWaitLimitMs; past it the message is
   * recorded with what the related streams hold (the source maps that case), loudly, so one merchant's missing
   * write never holds every other merchant's webhooks.
   */
  private holdOrGiveUp(source: string, message: BusMessage): void {
    const now = performance.now();
    const since = this.waitingSince.get(message.id) ?? now;
    this.waitingSince.set(message.id, since);
    if (now - since < this.relatedWaitLimitMs) throw new RelatedStreamsNotReadyError(source, message.id);
    this.logger.error({
      msg: 'related streams still not written after the wait limit; recording the webhook event without them',
      source,
      messageId: message.id,
      streamId: message.key,
      waitedMs: Math.round(now - since),
    });
  }

  /** A source's readiness check; one that throws is a mapping bug, which the mapping meets and skips, loudly. */
  private relatedReady(
    source: WebhookSource,
    message: BusMessage,
    history: readonly StreamEvent[] | undefined,
    related: RelatedHistories | undefined,
  ): boolean {
    if (!source.relatedReady || !history || !related) return true;
    try {
      return source.relatedReady(message, history, related);
    } catch {
      return true;
    }
  }

  /** The whole of each stream the source names (read, like the history, outside the mapping's try). */
  private async related(
    source: WebhookSource,
    message: BusMessage,
    history: readonly StreamEvent[] | undefined,
  ): Promise<RelatedHistories | undefined> {
    if (!source.relatedStreams || !history) return undefined;
    let streamIds: readonly string[];
    try {
      streamIds = source.relatedStreams(message, history);
    } catch {
      return undefined; // the mapping meets the same bug and is skipped, loudly, below
    }
    const related = new Map<string, readonly StreamEvent[]>();
    for (const streamId of streamIds) related.set(streamId, await this.eventStore.readStream(streamId));
    return related;
  }

  private history(message: BusMessage) {
    return streamHistoryThrough(this.eventStore, { ...message, streamId: message.key });
  }
}
