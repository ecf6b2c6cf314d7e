/**
 * KafkaEventBus against a scripted stand-in for kafkajs (no broker runs here; the conformance suite in
 * kafka-event-bus.int.spec.ts runs the real thing wherever Docker or KAFKA_BROKERS is available). These cases pin
 * the calls the adapter makes: producer settings and record shape, and when offsets are committed.
 */
import type * as KafkaJs from 'kafkajs';
import type { EachBatchPayload, KafkaMessage, ProducerBatch, ProducerConfig } from 'kafkajs';
import type { BusMessage } from '../event-bus.port';
import { decodeBusMessage, encodeBusMessage } from '../bus-message';

interface Commit {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
}

const mockKafka = {
  producerConfigs: [] as ProducerConfig[],
  batches: [] as ProducerBatch[],
  topics: new Set<string>(),
  created: [] as string[],
  commits: [] as Commit[],
  eachBatch: undefined as ((payload: EachBatchPayload) => Promise<void>) | undefined,
  committedOffsets: new Map<string, string>(),
  highWatermarks: new Map<string, string>(),
  /** Instrumentation listeners of the consumer (GROUP_JOIN...), by event name. */
  listeners: new Map<string, () => void>(),
  reset(): void {
    this.listeners = new Map();
    this.producerConfigs = [];
    this.batches = [];
    this.topics = new Set();
    this.created = [];
    this.commits = [];
    this.eachBatch = undefined;
    this.committedOffsets = new Map();
    this.highWatermarks = new Map();
  },
};

jest.mock('kafkajs', () => {
  const actual = jest.requireActual<typeof KafkaJs>('kafkajs');
  class Kafka {
    producer(config: ProducerConfig) {
      mockKafka.producerConfigs.push(config);
      return {
        connect: async () => undefined,
        disconnect: async () => undefined,
        sendBatch: async (batch: ProducerBatch) => {
          mockKafka.batches.push(batch);
          return [];
        },
      };
    }
    admin() {
      return {
        connect: async () => undefined,
        disconnect: async () => undefined,
        listTopics: async () => [...mockKafka.topics],
        createTopics: async ({ topics }: { topics: Array<{ topic: string }> }) => {
          for (const t of topics) {
            mockKafka.topics.add(t.topic);
            mockKafka.created.push(t.topic);
          }
          return true;
        },
        fetchTopicOffsets: async (topic: string) =>
          [0].map((partition) => ({
            partition,
            offset: mockKafka.highWatermarks.get(`${topic}/${partition}`) ?? '0',
            high: mockKafka.highWatermarks.get(`${topic}/${partition}`) ?? '0',
            low: '0',
          })),
        fetchOffsets: async ({ topics }: { topics: string[] }) =>
          topics.map((topic) => ({
            topic,
            partitions: [
              { partition: 0, offset: mockKafka.committedOffsets.get(`${topic}/0`) ?? '-1', metadata: null },
            ],
          })),
      };
    }
    consumer() {
      return {
        events: { GROUP_JOIN: 'consumer.group_join' },
        on: (event: string, listener: () => void) => {
          mockKafka.listeners.set(event, listener);
          return () => mockKafka.listeners.delete(event);
        },
        connect: async () => undefined,
        disconnect: async () => undefined,
        subscribe: async () => undefined,
        run: async (config: { eachBatch: (payload: EachBatchPayload) => Promise<void> }) => {
          mockKafka.eachBatch = config.eachBatch;
        },
        commitOffsets: async (offsets: Commit[]) => {
          for (const c of offsets) {
            mockKafka.commits.push(c);
            mockKafka.committedOffsets.set(`${c.topic}/${c.partition}`, c.offset);
          }
        },
      };
    }
  }
  return { ...actual, Kafka };
});

// Imported after the mock is declared (jest hoists jest.mock above imports anyway).
import { KAFKA_HEADERS, KafkaEventBus } from './kafka-event-bus';

const TOPIC = 'payments.payment.v1';

const busMessage = (id: string, revision: number): BusMessage => ({
  id,
  topic: TOPIC,
  key: 'payment-pay_1',
  type: 'PaymentCaptured',
  data: { amount: 10n },
  metadata: { merchantId: 'mer_1' },
  revision,
  recordedAt: '2026-01-01T00:00:00.000Z',
});

const kafkaMessage = (offset: string, message: BusMessage): KafkaMessage => ({
  key: Buffer.from(message.key),
  value: Buffer.from(encodeBusMessage(message)),
  timestamp: '0',
  attributes: 0,
  offset,
  headers: {},
});

function batchPayload(messages: KafkaMessage[], running: () => boolean = () => true): EachBatchPayload {
  return {
    batch: {
      topic: TOPIC,
      partition: 0,
      highWatermark: '100',
      messages,
      isEmpty: () => messages.length === 0,
      firstOffset: () => messages[0]?.offset ?? null,
      lastOffset: () => messages[messages.length - 1]?.offset ?? '-1',
      offsetLag: () => '0',
      offsetLagLow: () => '0',
    },
    resolveOffset: () => undefined,
    heartbeat: async () => undefined,
    pause: () => () => undefined,
    commitOffsetsIfNecessary: async () => undefined,
    uncommittedOffsets: () => ({ topics: [] }),
    isRunning: running,
    isStale: () => false,
  };
}

const runBatch = (payload: EachBatchPayload): Promise<void> => {
  if (!mockKafka.eachBatch) throw new Error('the consumer is not running');
  return mockKafka.eachBatch(payload);
};

describe('KafkaEventBus (kafkajs stand-in)', () => {
  beforeEach(() => mockKafka.reset());

  it('publishes through an idempotent producer, keyed by stream id, with the JSON envelope and id/type headers', async () => {
    const bus = new KafkaEventBus({ brokers: ['kafka:9092'], numPartitions: 3 });
    await bus.publish([
      busMessage('evt_1', 0),
      { ...busMessage('evt_2', 0), topic: 'ledger.charge.v1', key: 'charge-1' },
    ]);
    await bus.close();

    expect(mockKafka.producerConfigs[0]).toMatchObject({ idempotent: true, maxInFlightRequests: 1 });
    expect(mockKafka.created.sort()).toEqual(['ledger.charge.v1', TOPIC]);
    const batch = mockKafka.batches[0];
    expect(batch?.acks).toBe(-1);
    expect(batch?.topicMessages?.map((t) => t.topic)).toEqual([TOPIC, 'ledger.charge.v1']);
    const record = batch?.topicMessages?.[0]?.messages[0];
    expect(record?.key).toBe('payment-pay_1');
    expect(record?.headers).toEqual({
      [KAFKA_HEADERS.messageId]: 'evt_1',
      [KAFKA_HEADERS.messageType]: 'PaymentCaptured',
      [KAFKA_HEADERS.revision]: '0',
      [KAFKA_HEADERS.contentType]: 'application/json',
    });
    expect(decodeBusMessage(String(record?.value))).toEqual({
      ...busMessage('evt_1', 0),
      data: { amount: '10' },
    });
  });

  it('commits the next offset of a message only after its handler resolved', async () => {
    const bus = new KafkaEventBus({ brokers: ['kafka:9092'] });
    let release: () => void = () => undefined;
    const handled: string[] = [];
    const subscription = await bus.consume({
      group: 'g',
      topics: [TOPIC],
      handler: async (m) => {
        if (m.id === 'evt_6') await new Promise<void>((resolve) => (release = resolve));
        handled.push(m.id);
      },
    });
    const running = runBatch(
      batchPayload([kafkaMessage('5', busMessage('evt_5', 0)), kafkaMessage('6', busMessage('evt_6', 1))]),
    );
    await until(() => handled.length === 1 && mockKafka.commits.length === 1);
    expect(mockKafka.commits).toEqual([{ topic: TOPIC, partition: 0, offset: '6' }]);
    release();
    await running;
    expect(handled).toEqual(['evt_5', 'evt_6']);
    expect(mockKafka.commits.map((c) => c.offset)).toEqual(['6', '7']);
    await subscription.stop();
    await bus.close();
  });

  it('retries a failing handler on the same message and commits once it succeeds', async () => {
    const bus = new KafkaEventBus({ brokers: ['kafka:9092'], retry: { initialMs: 1, maxMs: 5 } });
    let failures = 2;
    const errors: string[] = [];
    const subscription = await bus.consume({
      group: 'g',
      topics: [TOPIC],
      handler: async () => {
        if (failures-- > 0) throw new Error('down');
      },
      onError: (_e, m) => errors.push(m.id),
    });
    await runBatch(batchPayload([kafkaMessage('9', busMessage('evt_9', 0))]));
    expect(errors).toEqual(['evt_9', 'evt_9']);
    expect(mockKafka.commits.map((c) => c.offset)).toEqual(['10']);
    await subscription.stop();
    await bus.close();
  });

  it('leaves the offset uncommitted when the consumer stops while a handler keeps failing', async () => {
    const bus = new KafkaEventBus({ brokers: ['kafka:9092'], retry: { initialMs: 5, maxMs: 5 } });
    let attempts = 0;
    const subscription = await bus.consume({
      group: 'g',
      topics: [TOPIC],
      handler: async () => {
        attempts++;
        throw new Error('down');
      },
    });
    const running = runBatch(
      batchPayload([kafkaMessage('3', busMessage('evt_3', 0)), kafkaMessage('4', busMessage('evt_4', 1))]),
    );
    await until(() => attempts >= 2);
    await subscription.stop();
    await running;
    expect(mockKafka.commits).toEqual([]);
    await bus.close();
  });

  it('hands a batch handler the fetched messages in order, retries a failed batch whole, then commits past it', async () => {
    const bus = new KafkaEventBus({ brokers: ['kafka:9092'], retry: { initialMs: 1, maxMs: 5 } });
    const calls: string[][] = [];
    let failures = 1;
    const errors: string[] = [];
    const subscription = await bus.consume({
      group: 'g',
      topics: [TOPIC],
      handler: async () => {
        throw new Error('the batch handler is used instead');
      },
      handleBatch: async (messages) => {
        calls.push(messages.map((m) => m.id));
        if (failures-- > 0) throw new Error('down');
      },
      onError: (_e, m) => errors.push(m.id),
    });
    await runBatch(
      batchPayload([
        kafkaMessage('20', busMessage('evt_20', 0)),
        kafkaMessage('21', busMessage('evt_21', 1)),
        kafkaMessage('22', busMessage('evt_22', 2)),
      ]),
    );
    expect(calls).toEqual([
      ['evt_20', 'evt_21', 'evt_22'],
      ['evt_20', 'evt_21', 'evt_22'],
    ]);
    expect(errors).toEqual(['evt_20']);
    expect(mockKafka.commits.map((c) => c.offset)).toEqual(['23']);
    await subscription.stop();
    await bus.close();
  });

  it('announces a (re)assignment to the consumer (onAssigned) before it handles the first message of it', async () => {
    const bus = new KafkaEventBus({ brokers: ['kafka:9092'], retry: { initialMs: 1, maxMs: 5 } });
    const calls: string[] = [];
    let refreshFailures = 1;
    const subscription = await bus.consume({
      group: 'g',
      topics: [TOPIC],
      handler: async (m) => {
        calls.push(m.id);
      },
      onAssigned: async () => {
        calls.push('assigned');
        if (refreshFailures-- > 0) throw new Error('database down');
      },
    });
    const joined = mockKafka.listeners.get('consumer.group_join');
    joined?.();
    await runBatch(batchPayload([kafkaMessage('0', busMessage('evt_a', 0))]));
    await runBatch(batchPayload([kafkaMessage('1', busMessage('evt_b', 1))]));
    // A rebalance: the member joins again and announces the new assignment once more.
    joined?.();
    await runBatch(batchPayload([kafkaMessage('2', busMessage('evt_c', 2))]));
    // Retried until it succeeds; the message waits for it.
    expect(calls).toEqual(['assigned', 'assigned', 'evt_a', 'evt_b', 'assigned', 'evt_c']);
    await subscription.stop();
    await bus.close();
  });

  it('caughtUp waits until the group committed up to the end offsets seen when it was called', async () => {
    const bus = new KafkaEventBus({ brokers: ['kafka:9092'], caughtUpPollMs: 5 });
    const subscription = await bus.consume({ group: 'g', topics: [TOPIC], handler: async () => undefined });
    mockKafka.highWatermarks.set(`${TOPIC}/0`, '2');
    let caughtUp = false;
    const waiting = subscription.caughtUp().then(() => (caughtUp = true));
    await runBatch(batchPayload([kafkaMessage('0', busMessage('evt_a', 0))]));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(caughtUp).toBe(false);
    await runBatch(batchPayload([kafkaMessage('1', busMessage('evt_b', 1))]));
    await waiting;
    expect(caughtUp).toBe(true);
    await subscription.stop();
    await bus.close();
  });
});

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
