import 'reflect-metadata';
import { webhookDispatchService } from '@stablepay/webhook-dispatch-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

runMain('webhook-dispatch', () => startService(platformConfigFromEnv(process.env), [webhookDispatchService()], { service: 'webhook-dispatch' }));
