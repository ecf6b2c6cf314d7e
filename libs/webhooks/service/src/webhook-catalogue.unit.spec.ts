import { WebhookConformance } from '@stablepay/testing';
import { WEBHOOK_EVENT_TYPES } from '@stablepay/webhooks-domain';

// docs/asyncapi.yaml (channel merchantWebhooks) is the public contract of the webhook bodies; WEBHOOK_EVENT_TYPES is
// the catalogue the code sends. Keep them in step.
describe('docs/asyncapi.yaml merchantWebhooks', () => {
  it('documents exactly the webhook types of WEBHOOK_EVENT_TYPES, each in one message', () => {
    const documented = WebhookConformance.fromFiles().types();
    expect([...documented].sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
  });
});
