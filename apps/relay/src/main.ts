import 'reflect-metadata';
import { platformConfigFromEnv, relayService, runMain, startService } from '@stablepay/runtime';

// The event store -> Kafka relay (EVENT_BUS=kafka only; with store-log the store is the bus and this exits 78).
runMain('relay', async () => {
  const config = platformConfigFromEnv(process.env);
  return startService(config, [relayService(config)], { service: 'relay' });
});
