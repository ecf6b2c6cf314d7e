import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createPostgresEventStore } from '@stablepay/event-store';
import { createTestDatabase, testPool } from '@stablepay/testing';
import { describeEventBusConformance } from '../event-bus.conformance';
import { EventStoreRelay } from '../relay/event-store-relay';
import { KafkaEventBus } from './kafka-event-bus';

type KafkaPlan =
  | { readonly kind: 'container' }
  | { readonly kind: 'brokers'; readonly brokers: string[] }
  | { readonly kind: 'skip'; readonly reason: string };

/** Testcontainers when a Docker daemon answers, else KAFKA_BROKERS, else a skip with the reason. */
function kafkaPlan(): KafkaPlan {
  const docker = dockerAnswers();
  if (docker === true) return { kind: 'container' };
  const brokers = process.env['KAFKA_BROKERS'];
  if (brokers)
    return {
      kind: 'brokers',
      brokers: brokers
        .split(',')
        .map((b) => b.trim())
        .filter(Boolean),
    };
  return { kind: 'skip', reason: `${docker} and KAFKA_BROKERS is not set` };
}

/** true, or why Docker cannot be used. */
function dockerAnswers(): true | string {
  if (!process.env['DOCKER_HOST'] && !existsSync('/var/run/docker.sock')) {
    return 'no Docker daemon (DOCKER_HOST unset, /var/run/docker.sock absent)';
  }
  try {
    execFileSync('docker', ['info'], { timeout: 5_000, stdio: 'ignore' });
    return true;
  } catch (error) {
    return `no Docker daemon (docker info failed: ${error instanceof Error ? error.message.split('\n')[0] : String(error)})`;
  }
}

const plan = kafkaPlan();

if (plan.kind === 'skip') {
  console.log(`KafkaEventBus conformance skipped: ${plan.reason}`);
  describe.skip(`EventBus conformance: KafkaEventBus (skipped: ${plan.reason})`, () => {
    it('needs a Docker daemon for @testcontainers/kafka or a broker list in KAFKA_BROKERS', () => undefined);
  });
} else {
  jest.setTimeout(180_000);
  describeEventBusConformance(`KafkaEventBus (${plan.kind})`, async () => {
    let stopContainer: () => Promise<unknown> = async () => undefined;
    let brokers: string[];
    if (plan.kind === 'container') {
      const { KafkaContainer } = await import('@testcontainers/kafka');
      const container = await new KafkaContainer('confluentinc/cp-kafka:7.6.1').withKraft().start();
      stopContainer = () => container.stop();
      brokers = [`${container.getHost()}:${container.getMappedPort(9093)}`];
    } else {
      brokers = plan.brokers;
    }
    const database = await createTestDatabase();
    const store = await createPostgresEventStore({ url: database.url, poolSize: 4 });
    const pool = testPool({ connectionString: database.url, max: 3 });
    // Production's path: services append to the store, the relay publishes to Kafka, consumers read Kafka.
    const publisher = new KafkaEventBus({ brokers, numPartitions: 3 });
    const relay = new EventStoreRelay(store, publisher, {
      subscriptionId: `relay:kafka:${randomBytes(4).toString('hex')}`,
    });
    await relay.start();
    return {
      append: async (streamId, events) => {
        await store.appendToStream(streamId, events);
        await relay.caughtUp();
      },
      openBus: async () =>
        new KafkaEventBus({
          brokers,
          numPartitions: 3,
          retry: { initialMs: 20, maxMs: 200 },
          caughtUpPollMs: 100,
          consumer: { sessionTimeout: 10_000, heartbeatInterval: 1_000, maxWaitTimeInMs: 100 },
        }),
      pool,
      store,
      dispose: async () => {
        await relay.stop();
        await publisher.close();
        await store.close();
        await pool.end();
        await database.drop();
        await stopContainer();
      },
    };
  });
}
