import {
  Kafka,
  Partitioners,
  logLevel as KafkaLogLevel,
  type Admin,
  type Consumer,
  type ConsumerConfig,
  type EachBatchPayload,
  type IHeaders,
  type KafkaMessage,
  type Message,
  type Producer,
} from 'kafkajs';
import {
  backoffDelay,
  DEFAULT_BACKOFF,
  InterruptibleSleep,
  type BackoffSettings,
} from '@stablepay/event-store';
import { decodeBusMessage, encodeBusMessage } from '../bus-message';
import type { BusMessage, BusSubscription, ConsumeOptions, EventBus } from '../event-bus.port';
import { categoriesForTopics } from '../topics';

/** Header names carried next to the JSON envelope, so brokers' tools can route and filter without parsing. */
export const KAFKA_HEADERS = {
  messageId: 'message-id',
  messageType: 'message-type',
  revision: 'revision',
  contentType: 'content-type',
} as const;

export interface KafkaEventBusOptions {
  readonly brokers: readonly string[];
  readonly clientId?: string;
  /** Partitions of the topics this bus creates when they are missing (existing topics are left as they are). */
  readonly numPartitions?: number;
  /** Replication of created topics; -1 takes the broker's default. */
  readonly replicationFactor?: number;
  /** Back-off between retries of a failing handler. */
  readonly retry?: BackoffSettings;
  /** Extra consumer settings (session timeout, fetch wait...). */
  readonly consumer?: Omit<ConsumerConfig, 'groupId'>;
  /** Polling interval of caughtUp(). */
  readonly caughtUpPollMs?: number;
  readonly logLevel?: KafkaLogLevel;
  /** Reports failures that are not a handler's (commit or decode errors); the consumer keeps retrying. */
  readonly onInfrastructureError?: (error: unknown, group: string) => void;
}

/**
 * EventBus on Kafka (the distributed deployment), with kafkajs.
 *
 * Publishing: an idempotent producer with one request in flight, so a retried produce neither duplicates nor
 * reorders; key = message.key (the aggregate's stream id), so one aggregate's messages land on one partition,
 * in order. The value is the JSON envelope; id, type and revision are repeated as headers.
 *
 * Consuming: a consumer group; each partition is handled one message at a time and the next offset is
 * committed only after the handler resolves (at-least-once). A failing handler is retried with back-off on the
 * same message, never skipped; if the consumer stops meanwhile, the offset stays uncommitted and the next
 * member of the group gets the message again. A new group starts at the beginning of each topic.
 */
export class KafkaEventBus implements EventBus {
  private readonly kafka: Kafka;
  private producer: Promise<Producer> | undefined;
  private admin: Promise<Admin> | undefined;
  private readonly consumers = new Set<BusSubscription>();
  private readonly knownTopics = new Set<string>();

  constructor(private readonly options: KafkaEventBusOptions) {
    this.kafka = new Kafka({
      clientId: options.clientId ?? 'stablepay',
      brokers: [...options.brokers],
      logLevel: options.logLevel ?? KafkaLogLevel.WARN,
    });
  }

  async publish(messages: readonly BusMessage[]): Promise<void> {
    if (messages.length === 0) return;
    const byTopic = new Map<string, Message[]>();
    for (const message of messages) {
      const list = byTopic.get(message.topic) ?? [];
      list.push(toKafkaMessage(message));
      byTopic.set(message.topic, list);
    }
    await this.ensureTopics([...byTopic.keys()]);
    const producer = await this.connectedProducer();
    await producer.sendBatch({
      acks: -1,
      topicMessages: [...byTopic].map(([topic, list]) => ({ topic, messages: list })),
    });
  }

  async consume(options: ConsumeOptions): Promise<BusSubscription> {
    const topics = [...new Set(options.topics)];
    if (topics.length === 0) throw new TypeError(`consumer group ${options.group}: no topic to consume`);
    categoriesForTopics(topics); // rejects unknown topics
    await this.ensureTopics(topics);
    const consumer = this.kafka.consumer({
      sessionTimeout: 30_000,
      heartbeatInterval: 3_000,
      maxWaitTimeInMs: 500,
      ...this.options.consumer,
      groupId: options.group,
      allowAutoTopicCreation: false,
    });
    const member = new KafkaGroupMember(
      consumer,
      options,
      this.options.retry ?? DEFAULT_BACKOFF,
      this.options,
    );
    await member.start(topics);
    const subscription: BusSubscription = {
      caughtUp: async () => this.waitForGroup(options.group, topics, member),
      stop: async () => {
        this.consumers.delete(subscription);
        await member.stop();
      },
    };
    this.consumers.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    await Promise.all([...this.consumers].map((c) => c.stop()));
    this.consumers.clear();
    const [producer, admin] = [this.producer, this.admin];
    this.producer = undefined;
    this.admin = undefined;
    await Promise.all([
      producer?.then((p) => p.disconnect()).catch(() => undefined),
      admin?.then((a) => a.disconnect()).catch(() => undefined),
    ]);
  }

  /** Creates missing topics with the configured partitioning (auto-creation would use broker defaults). */
  async ensureTopics(topics: readonly string[]): Promise<void> {
    const unknown = topics.filter((t) => !this.knownTopics.has(t));
    if (unknown.length === 0) return;
    const admin = await this.connectedAdmin();
    const existing = new Set(await admin.listTopics());
    const missing = unknown.filter((t) => !existing.has(t));
    if (missing.length > 0) {
      try {
        await admin.createTopics({
          waitForLeaders: true,
          topics: missing.map((topic) => ({
            topic,
            numPartitions: this.options.numPartitions ?? 6,
            replicationFactor: this.options.replicationFactor ?? -1,
          })),
        });
      } catch (error) {
        // Another process may have created some of them in between; what matters is that they all exist now.
        const now = new Set(await admin.listTopics());
        if (!missing.every((t) => now.has(t))) throw error;
      }
    }
    for (const t of unknown) this.knownTopics.add(t);
  }

  /** Resolves once the group's committed offsets reach the end offsets the topics had when this was called. */
  private async waitForGroup(
    group: string,
    topics: readonly string[],
    member: KafkaGroupMember,
  ): Promise<void> {
    const admin = await this.connectedAdmin();
    const targets = new Map<string, bigint>();
    for (const topic of topics) {
      for (const p of await admin.fetchTopicOffsets(topic)) {
        if (BigInt(p.high) > BigInt(p.low)) targets.set(`${topic}/${p.partition}`, BigInt(p.high));
      }
    }
    for (;;) {
      if (member.stopped) throw new Error(`consumer of group ${group} stopped before catching up`);
      const committed = new Map<string, bigint>();
      for (const t of await admin.fetchOffsets({ groupId: group, topics: [...topics] })) {
        for (const p of t.partitions) committed.set(`${t.topic}/${p.partition}`, BigInt(p.offset));
      }
      if ([...targets].every(([tp, high]) => (committed.get(tp) ?? -1n) >= high)) return;
      await new Promise((resolve) => setTimeout(resolve, this.options.caughtUpPollMs ?? 100));
    }
  }

  private connectedProducer(): Promise<Producer> {
    this.producer ??= this.forgetOnFailure(
      (async () => {
        const producer = this.kafka.producer({
          idempotent: true,
          maxInFlightRequests: 1,
          allowAutoTopicCreation: false,
          createPartitioner: Partitioners.DefaultPartitioner,
        });
        await producer.connect();
        return producer;
      })(),
      () => (this.producer = undefined),
    );
    return this.producer;
  }

  private connectedAdmin(): Promise<Admin> {
    this.admin ??= this.forgetOnFailure(
      (async () => {
        const admin = this.kafka.admin();
        await admin.connect();
        return admin;
      })(),
      () => (this.admin = undefined),
    );
    return this.admin;
  }

  /** A failed connection attempt is not cached: the next call tries again. */
  private forgetOnFailure<T>(connecting: Promise<T>, forget: () => void): Promise<T> {
    void connecting.catch(forget);
    return connecting;
  }
}

/** Largest slice of a fetched Kafka batch handed to one handleBatch call. */
const MAX_HANDLER_BATCH = 500;

/**
 * One member of a consumer group: handles each assigned partition in order, commits after each message (or,
 * with handleBatch, after each slice of a fetched batch).
 */
class KafkaGroupMember {
  stopped = false;
  private readonly retrySleep = new InterruptibleSleep();
  /** The group (re)joined: options.onAssigned runs before the next batch is handled. */
  private assigned = false;

  constructor(
    private readonly consumer: Consumer,
    private readonly options: ConsumeOptions,
    private readonly retry: BackoffSettings,
    private readonly busOptions: KafkaEventBusOptions,
  ) {}

  async start(topics: readonly string[]): Promise<void> {
    // Emitted inside joinAndSync, before fetching resumes: the next batch is one of the new assignment.
    this.consumer.on(this.consumer.events.GROUP_JOIN, () => {
      this.assigned = true;
    });
    await this.consumer.connect();
    try {
      await this.consumer.subscribe({ topics: [...topics], fromBeginning: true });
      await this.consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        eachBatch: (payload) => this.handleBatch(payload),
      });
    } catch (error) {
      await this.consumer.disconnect();
      throw error;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.retrySleep.wake();
    // disconnect() waits for the batch in progress, which returns promptly once `stopped` is seen.
    await this.consumer.disconnect();
  }

  private async handleBatch({
    batch,
    resolveOffset,
    heartbeat,
    isRunning,
    isStale,
  }: EachBatchPayload): Promise<void> {
    const active = (): boolean => !this.stopped && isRunning() && !isStale();
    if (!(await this.announceAssignment(heartbeat, active))) return;
    if (this.options.handleBatch) {
      for (let i = 0; i < batch.messages.length; i += MAX_HANDLER_BATCH) {
        if (!active()) return;
        const chunk = batch.messages.slice(i, i + MAX_HANDLER_BATCH);
        const last = chunk[chunk.length - 1];
        if (!last || !(await this.handleChunkWithRetry(chunk, heartbeat, active))) return;
        resolveOffset(last.offset);
        await this.consumer.commitOffsets([
          { topic: batch.topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() },
        ]);
        await heartbeat();
      }
      return;
    }
    for (const raw of batch.messages) {
      if (this.stopped || !isRunning() || isStale()) return;
      const handled = await this.handleWithRetry(
        raw,
        heartbeat,
        () => !this.stopped && isRunning() && !isStale(),
      );
      if (!handled) return; // stopping or rebalancing: leave the offset uncommitted, the group redelivers it
      resolveOffset(raw.offset);
      await this.consumer.commitOffsets([
        { topic: batch.topic, partition: batch.partition, offset: (BigInt(raw.offset) + 1n).toString() },
      ]);
      await heartbeat();
    }
  }

  /** Runs options.onAssigned once after each (re)join, before any message of the new assignment is handled. */
  private async announceAssignment(heartbeat: () => Promise<void>, active: () => boolean): Promise<boolean> {
    const onAssigned = this.options.onAssigned;
    if (!this.assigned || !onAssigned) return true;
    for (let failures = 0; active(); failures++) {
      try {
        this.assigned = false;
        await onAssigned();
        return true;
      } catch (error) {
        this.assigned = true;
        this.busOptions.onInfrastructureError?.(error, this.options.group);
        await this.retrySleep.sleep(backoffDelay(this.retry, failures));
        if (!active()) break;
        await heartbeat();
      }
    }
    return false;
  }

  private async handleWithRetry(
    raw: KafkaMessage,
    heartbeat: () => Promise<void>,
    active: () => boolean,
  ): Promise<boolean> {
    for (let failures = 0; active(); failures++) {
      let message: BusMessage | undefined;
      try {
        message = decodeBusMessage(raw.value ?? '');
        await this.options.handler(message);
        return true;
      } catch (error) {
        if (message) this.report(error, message);
        else this.busOptions.onInfrastructureError?.(error, this.options.group);
        await this.retrySleep.sleep(backoffDelay(this.retry, failures));
        if (!active()) break;
        // Stay in the group while retrying; a rebalance error from here ends the batch without a commit.
        await heartbeat();
      }
    }
    return false;
  }

  /** One handleBatch call over a chunk of a partition's messages, retried whole until it succeeds. */
  private async handleChunkWithRetry(
    chunk: readonly KafkaMessage[],
    heartbeat: () => Promise<void>,
    active: () => boolean,
  ): Promise<boolean> {
    const handleBatch = this.options.handleBatch;
    if (!handleBatch) return false;
    for (let failures = 0; active(); failures++) {
      let messages: BusMessage[] | undefined;
      try {
        messages = chunk.map((raw) => decodeBusMessage(raw.value ?? ''));
        await handleBatch(messages);
        return true;
      } catch (error) {
        const first = messages?.[0];
        if (first) this.report(error, first);
        else this.busOptions.onInfrastructureError?.(error, this.options.group);
        await this.retrySleep.sleep(backoffDelay(this.retry, failures));
        if (!active()) break;
        await heartbeat();
      }
    }
    return false;
  }

  private report(error: unknown, message: BusMessage): void {
    try {
      this.options.onError?.(error, message);
    } catch {
      // A throwing error reporter must not turn a retry into a skipped message.
    }
  }
}

function toKafkaMessage(message: BusMessage): Message {
  const headers: IHeaders = {
    [KAFKA_HEADERS.messageId]: message.id,
    [KAFKA_HEADERS.messageType]: message.type,
    [KAFKA_HEADERS.revision]: String(message.revision),
    [KAFKA_HEADERS.contentType]: 'application/json',
  };
  return { key: message.key, value: encodeBusMessage(message), headers };
}
