/**
 * Domain errors carry the machine code SPEC.md names and the error type of the API envelope.
 * They are plain objects of meaning; only the HTTP edge (the exception filter in @stablepay/http)
 * maps them to a status code and the `{ error: { type, message, param, code } }` envelope.
 */
export type ErrorType =
  | 'validation_error'
  | 'invalid_request'
  | 'cannot_process'
  | 'authentication_error'
  | 'not_found'
  | 'conflict'
  | 'rate_limited'
  | 'api_error';

export interface DomainErrorShape {
  readonly type: ErrorType;
  readonly message: string;
  readonly code?: string;
  readonly param?: string;
  /** HTTP status the edge should use; each constructor below fixes it so the mapping has one source. */
  readonly status: number;
}

export class DomainError extends Error implements DomainErrorShape {
  readonly type: ErrorType;
  readonly code?: string;
  readonly param?: string;
  readonly status: number;

  constructor(shape: DomainErrorShape) {
    super(shape.message);
    this.name = 'DomainError';
    this.type = shape.type;
    this.status = shape.status;
    if (shape.code !== undefined) this.code = shape.code;
    if (shape.param !== undefined) this.param = shape.param;
  }

  toJSON(): DomainErrorShape {
    return {
      type: this.type,
      message: this.message,
      status: this.status,
      ...(this.code !== undefined ? { code: this.code } : {}),
      ...(this.param !== undefined ? { param: this.param } : {}),
    };
  }

  static isShape(value: unknown): value is DomainErrorShape {
    if (typeof value !== 'object' || value === null) return false;
    const v = value as Record<string, unknown>;
    return (
      typeof v['type'] === 'string' && typeof v['message'] === 'string' && typeof v['status'] === 'number'
    );
  }
}

/**
 * 400 validation_error: a field is missing, malformed or out of range. Every one carries a code, so a client can
 * branch on it as on every other error: the caller's when it has a more precise one, else Stripe's
 * `parameter_missing` for a field the request lacks (the one wording every such refusal uses: "<param> is
 * required...", fieldFault), else `parameter_invalid`.
 */
export const validationError = (param: string, message: string, code?: string): DomainError =>
  new DomainError({
    type: 'validation_error',
    status: 400,
    param,
    message,
    code: code ?? (message.startsWith(`${param} is required`) ? 'parameter_missing' : 'parameter_invalid'),
  });

/**
 * A nested field's name in `param`, as Stripe writes it: each key and index in brackets after the top-level field
 * (`fiat[currency]`, `metadata[plan_name]`, `supported_chains[1]`, `revocations[0][chain]`), the form a client also
 * uses for nested form fields; one style on every route.
 */
export const nestedParam = (field: string, ...keys: ReadonlyArray<string | number>): string =>
  field + keys.map((key) => `[${key}]`).join('');

/**
 * 400 validation_error code unknown_parameter: a body field or query parameter the request does not take, named by
 * its path (`fiat[ibn]`, nestedParam). One wording for the same mistake on every route, as Stripe words it; `takes`, when
 * the route knows it, says what it does take ("this request takes a, b").
 */
export const unknownParameter = (param: string, takes?: string): DomainError =>
  validationError(
    param,
    `Received unknown parameter: ${param}${takes ? ` (${takes})` : ''}.`,
    'unknown_parameter',
  );

/** The `takes` of unknownParameter for a route that takes these fields (none: it says so). */
export const takesFields = (fields: readonly string[]): string =>
  fields.length > 0 ? `this request takes ${fields.join(', ')}` : 'this request takes no parameters';

/**
 * 400 invalid_request: the request as a whole cannot be understood. Give it a code: every 400 carries one
 * (`invalid_json` for a body that is not a JSON object: bodyNotAnObject).
 */
export const invalidRequest = (message: string, code?: string, param?: string): DomainError =>
  new DomainError({
    type: 'invalid_request',
    status: 400,
    message,
    ...(code ? { code } : {}),
    ...(param ? { param } : {}),
  });

/** 400 invalid_json: a body that is not a JSON object, as the body parser answers a bare `null` or an array. */
export const bodyNotAnObject = (): DomainError =>
  invalidRequest('The request body must be a JSON object.', 'invalid_json');

/** 422 cannot_process: well-formed, but a business rule forbids it. */
export const cannotProcess = (code: string, message: string, param?: string): DomainError =>
  new DomainError({ type: 'cannot_process', status: 422, code, message, ...(param ? { param } : {}) });

/** 404: also used for another merchant's resources, so existence never leaks. */
export const notFound = (resource: string, id?: string): DomainError =>
  new DomainError({
    type: 'invalid_request',
    status: 404,
    code: 'resource_missing',
    message: id ? `No such ${resource}: '${id}'` : `No such ${resource}`,
    ...(id !== undefined ? { param: 'id' } : {}),
  });

/** 409: the request conflicts with the resource's current state. */
export const conflict = (code: string, message: string, param?: string): DomainError =>
  new DomainError({ type: 'invalid_request', status: 409, code, message, ...(param ? { param } : {}) });
