import 'reflect-metadata';
import { platformConfigFromEnv, relayService, runMain, startService } from '@stablepay/runtime';
import { SUBSCRIPTIONS_UPCASTERS } from '@stablepay/subscriptions-service';

/** Every scope's upcasters: what the relay publishes is the newest version of each event type (docs/asyncapi.yaml). */
const upcasters = [...SUBSCRIPTIONS_UPCASTERS];

// The event store -> Kafka relay (EVENT_BUS=kafka only; with store-log the store is the bus and this exits 78).
runMain('relay', async () => {
  const config = platformConfigFromEnv(process.env);
  return startService(config, [relayService(config, { upcasters })], { service: 'relay' });
});
