import { OpenApiConformance } from './openapi-conformance';

/** One document per OpenAPI version, saying the same thing each in its own dialect. */
const document = (version: '3.0.3' | '3.1.0') => {
  const nullableString =
    version === '3.0.3' ? { type: 'string', nullable: true } : { type: ['string', 'null'] };
  const nullableThing =
    version === '3.0.3'
      ? { allOf: [{ $ref: '#/components/schemas/Thing' }], nullable: true }
      : { oneOf: [{ $ref: '#/components/schemas/Thing' }, { type: 'null' }] };
  return {
    openapi: version,
    info: { title: 't', version: '1' },
    paths: {
      '/things/{id}': {
        get: {
          responses: {
            '200': {
              description: 'a thing',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } },
            },
            '4XX': { $ref: '#/components/responses/Error' },
          },
        },
      },
      '/things/{id}/either': {
        get: {
          responses: {
            '200': {
              description: 'a thing, or a free-form map of strings',
              content: {
                'application/json': {
                  schema: {
                    oneOf: [
                      { $ref: '#/components/schemas/Thing' },
                      { type: 'object', additionalProperties: { type: 'string' } },
                    ],
                  },
                },
              },
            },
          },
        },
      },
      '/things/latest': {
        get: {
          responses: {
            '200': {
              description: 'the latest, if any',
              content: {
                'application/json': {
                  schema: { type: 'object', required: ['latest'], properties: { latest: nullableThing } },
                },
              },
            },
          },
        },
      },
    },
    components: {
      responses: {
        Error: {
          description: 'error',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
      schemas: {
        Thing: {
          type: 'object',
          required: ['id', 'note', 'at'],
          properties: {
            id: { type: 'string', example: 'thg_1' },
            note: nullableString,
            at: { type: 'string', format: 'date-time' },
            tags: { type: 'object', additionalProperties: { type: 'string' } },
          },
        },
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['type'],
              properties: { type: { type: 'string' }, code: { type: 'string' } },
            },
          },
        },
      },
    },
  };
};
const thing = { id: 'thg_1', note: null, at: '2026-11-24T07:00:00.000Z', tags: { any: 'x' } };

describe.each(['3.0.3', '3.1.0'] as const)('OpenApiConformance (OpenAPI %s)', (version) => {
  const api = new OpenApiConformance(document(version));

  it('accepts a body that matches the documented schema, null where the dialect allows it', () => {
    expect(api.check({ method: 'GET', path: '/things/thg_1', status: 200, body: thing })).toEqual([]);
    expect(api.check({ method: 'GET', path: '/things/latest', status: 200, body: { latest: null } })).toEqual(
      [],
    );
    expect(
      api.check({ method: 'GET', path: '/things/latest?x=1', status: 200, body: { latest: thing } }),
    ).toEqual([]);
  });

  it('follows $ref into components: a referenced schema is enforced, not skipped', () => {
    const problems = api.check({
      method: 'GET',
      path: '/things/latest',
      status: 200,
      body: { latest: { id: 1 } },
    });
    expect(problems.join('\n')).toMatch(/latest/);
    expect(
      api.check({ method: 'GET', path: '/things/thg_1', status: 200, body: { ...thing, at: 'soon' } }),
    ).toEqual([expect.stringMatching(/body\/at must match format "date-time"/)]);
  });

  it('refuses null where the schema does not allow it', () => {
    expect(
      api.check({ method: 'GET', path: '/things/thg_1', status: 200, body: { ...thing, id: null } }),
    ).toEqual([expect.stringMatching(/body\/id must be string/)]);
  });

  it('reports a status the operation does not document, and takes 4XX and response $refs', () => {
    expect(api.check({ method: 'GET', path: '/things/thg_1', status: 500, body: {} })).toEqual([
      expect.stringMatching(/status 500 is not documented/),
    ]);
    expect(
      api.check({
        method: 'GET',
        path: '/things/thg_1',
        status: 404,
        body: { error: { type: 'invalid_request' } },
      }),
    ).toEqual([]);
    expect(
      api.check({ method: 'GET', path: '/things/thg_1', status: 404, body: { message: 'x' } }),
    ).not.toEqual([]);
  });

  it('reports a field no schema names, but not the keys of a free-form map', () => {
    expect(
      api.check({ method: 'GET', path: '/things/thg_1', status: 200, body: { ...thing, secret: 1 } }),
    ).toEqual([expect.stringMatching(/body\.secret is not documented/)]);
    expect(
      api.check({
        method: 'GET',
        path: '/things/thg_1',
        status: 404,
        body: { error: { type: 'x', hint: 'y' } },
      }),
    ).toEqual([expect.stringMatching(/body\.error\.hint is not documented/)]);
  });

  it('reads a oneOf of named and free-form branches by the branch the body is: a field beside a named branch is reported', () => {
    const either = (body: unknown) =>
      api.check({ method: 'GET', path: '/things/thg_1/either', status: 200, body });
    expect(either({ ...thing, secret: 1 })).toEqual([
      expect.stringMatching(/body\.secret is not documented/),
    ]);
    expect(either(thing)).toEqual([]);
    expect(either({ any: 'x', other: 'y' })).toEqual([]);
  });

  it('matches a literal path segment before a parameter, and reports an undocumented operation', () => {
    // `/things/latest` is its own operation: `{ latest }` would not be a Thing.
    expect(api.check({ method: 'GET', path: '/things/latest', status: 200, body: thing })).not.toEqual([]);
    expect(api.check({ method: 'POST', path: '/things/thg_1', status: 200, body: thing })).toEqual([
      expect.stringMatching(/no documented operation/),
    ]);
  });
});

describe('OpenApiConformance: the version decides the dialect', () => {
  it('refuses a document of another version', () => {
    expect(() => new OpenApiConformance({ ...document('3.1.0'), openapi: '2.0' })).toThrow(
      /not 3\.0\.x or 3\.1\.x/,
    );
  });

  it('does not read 3.0 `nullable` in a 3.1 document (it is not a 3.1 keyword)', () => {
    const mixed = document('3.1.0');
    mixed.components.schemas.Thing.properties.note = { type: 'string', nullable: true } as never;
    expect(() =>
      new OpenApiConformance(mixed).check({ method: 'GET', path: '/things/thg_1', status: 200, body: thing }),
    ).toThrow(/nullable/);
  });

  it('compiles every JSON response schema of the repository docs/openapi.yaml (3.1)', () => {
    expect(OpenApiConformance.fromFile().schemaProblems()).toEqual([]);
  });
});

describe('OpenApiConformance: media types', () => {
  it('reports a media type the response does not document, parameters aside on either side', () => {
    const doc = document('3.1.0');
    const ok = doc.paths['/things/{id}'].get.responses['200'];
    (ok as { content: Record<string, unknown> }).content = {
      'application/json; charset=utf-8': ok.content['application/json'],
    };
    const api = new OpenApiConformance(doc);
    expect(
      api.check({
        method: 'GET',
        path: '/things/thg_1',
        status: 200,
        body: undefined,
        contentType: 'text/html',
      }),
    ).toEqual([expect.stringMatching(/documents application\/json, got text\/html/)]);
    expect(
      api.check({
        method: 'GET',
        path: '/things/thg_1',
        status: 200,
        body: thing,
        contentType: 'application/json; charset=utf-8',
      }),
    ).toEqual([]);
    // The schema under a key with parameters is still enforced.
    expect(
      api.check({
        method: 'GET',
        path: '/things/thg_1',
        status: 200,
        body: { ...thing, id: 7 },
        contentType: null,
      }),
    ).toEqual([expect.stringMatching(/body\/id must be string/)]);
  });
});
