import { OpenApiConformance } from './openapi-conformance';
import { WebhookConformance } from './webhook-conformance';

/** An OpenAPI document holding the object, and an AsyncAPI document whose webhook message carries it. */
const openapi = new OpenApiConformance({
  openapi: '3.1.0',
  info: { title: 't', version: '1' },
  paths: {},
  components: {
    schemas: {
      Thing: {
        type: 'object',
        required: ['id'],
        properties: { id: { type: 'string', pattern: '^thg_' }, note: { type: ['string', 'null'] } },
      },
    },
  },
});
const asyncapi = {
  asyncapi: '3.0.0',
  channels: {
    merchantWebhooks: {
      address: null,
      messages: { ThingWebhook: { $ref: '#/components/messages/ThingWebhook' } },
    },
  },
  components: {
    messages: {
      ThingWebhook: {
        payload: {
          allOf: [
            { $ref: '#/components/schemas/Delivery' },
            {
              type: 'object',
              properties: {
                type: { enum: ['thing.created', 'thing.updated'] },
                data: { $ref: '#/components/schemas/ThingData' },
              },
            },
          ],
        },
      },
    },
    schemas: {
      Delivery: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'type', 'data'],
        properties: { id: { type: 'string' }, type: { type: 'string' }, data: { type: 'object' } },
      },
      ThingData: {
        type: 'object',
        additionalProperties: false,
        required: ['object'],
        properties: { object: { $ref: 'openapi.yaml#/components/schemas/Thing' } },
      },
    },
  },
};
const webhooks = new WebhookConformance(asyncapi, openapi);
const delivery = { id: 'evt_1', type: 'thing.created', data: { object: { id: 'thg_1', note: null } } };

describe('WebhookConformance', () => {
  it('accepts a delivery whose data matches the message of its type, objects read from the OpenAPI document', () => {
    expect(webhooks.types()).toEqual(['thing.created', 'thing.updated']);
    expect(webhooks.check(delivery)).toEqual([]);
  });

  it('enforces the OpenAPI object the message refers to', () => {
    expect(webhooks.check({ ...delivery, data: { object: { id: 'x' } } })).toEqual([
      expect.stringMatching(/body\/data\/object\/id must match pattern/),
    ]);
  });

  it('reports a field no schema names, in the envelope, in data and in the object', () => {
    expect(
      webhooks.check({
        ...delivery,
        livemode: true,
        data: { object: { id: 'thg_1', secret: 1 }, extra: {} },
      }),
    ).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/body\.livemode is not documented/),
        expect.stringMatching(/body\.data\.extra is not documented/),
        expect.stringMatching(/body\.data\.object\.secret is not documented/),
      ]),
    );
  });

  it('reports a type no message documents', () => {
    expect(webhooks.check({ ...delivery, type: 'thing.deleted' })).toEqual([
      expect.stringMatching(/no message of channel merchantWebhooks .* documents thing\.deleted/),
    ]);
  });

  it('reads the repository docs: every webhook message compiles against docs/openapi.yaml', () => {
    const repository = WebhookConformance.fromFiles();
    expect(repository.types().length).toBeGreaterThan(0);
    for (const type of repository.types())
      expect(repository.check({ type, id: 'evt_x', data: {} })).not.toEqual([]);
  });
});
