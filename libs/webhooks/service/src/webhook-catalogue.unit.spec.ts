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

describe('docs/asyncapi.yaml merchantWebhooks: the keys a type adds belong to that type only', () => {
  const webhooks = WebhookConformance.fromFiles();
  const body = (type: string, data: object) => ({
    id: 'evt_01m86wsfrc1w5jw9mh29vskekr',
    object: 'event',
    type,
    created_at: '2026-11-24T13:44:11.788Z',
    data,
  });
  /** The problems that are the rule's: the key forbidden (`false`) or missing, not a fault inside its value. */
  const about = (type: string, data: object, key: string) =>
    webhooks
      .check(body(type, data))
      .filter(
        (p) => p.includes(`/${key} boolean schema is false`) || p.includes(`required property '${key}'`),
      );

  it.each([
    ['payment.settled', { object: {}, transfer: {} }, 'transfer'],
    ['payment.recovered', { object: {} }, 'transfer'],
    ['subscription_checkout.created', { object: {}, first_charge: {} }, 'first_charge'],
    ['subscription_checkout.reorged', { object: {} }, 'reorged'],
    ['subscription.created', { object: {}, reorged: {} }, 'reorged'],
    ['subscription.created', { object: {}, settlement_mismatch: {} }, 'settlement_mismatch'],
    ['subscription.cancelled', { object: {} }, 'cancelled_by'],
    [
      'subscription.charge_failed',
      { object: { fee: '1' }, charge: { fee: '0', failure_reason: null } },
      'fee',
    ],
    [
      'subscription.charge_succeeded',
      { object: { fee: '1', failure_reason: null }, charge: { fee: '1', failure_reason: null } },
      'failure_reason',
    ],
  ])('%s with data %j is refused about %s', (type, data, key) => {
    expect(about(type, data, key)).not.toEqual([]);
  });
});
