import { validationError } from './errors';
import { CREATED_BOUND_FORMS, parseTimestampParam } from './timestamp';

/** Created-at bounds of a list or export: inclusive (gte, lte) or exclusive (gt, lt). */
export interface CreatedBounds {
  readonly createdGte?: Date;
  readonly createdGt?: Date;
  readonly createdLte?: Date;
  readonly createdLt?: Date;
}

const CREATED = {
  'created[gte]': 'createdGte',
  'created[gt]': 'createdGt',
  'created[lte]': 'createdLte',
  'created[lt]': 'createdLt',
} as const;

/** The query parameters of the created-at filter (Stripe's `created[gte|gt|lte|lt]`). */
export const CREATED_PARAMETERS: readonly string[] = Object.keys(CREATED);

/**
 * The one parser of a list's or export's time bound (`created[gte|gt|lte|lt]`, the charges' `charged_from` and
 * `charged_to`): Unix seconds, an RFC 3339 date-time or a date (midnight UTC), as Stripe's list filters take them;
 * anything else is 400 validation_error naming `param`. One parser, so no list takes a form another refuses.
 */
export function parseTimeBound(value: unknown, param: string): Date {
  return parseTimestampParam(value, param, CREATED_BOUND_FORMS);
}

/**
 * The one rule for `created[gte|gt|lte|lt]` (every list and export that filters on creation): each given once, in a
 * form parseTimeBound takes.
 */
export function parseCreatedBounds(query: Readonly<Record<string, unknown>>): CreatedBounds {
  const out: { -readonly [K in keyof CreatedBounds]: CreatedBounds[K] } = {};
  for (const [param, field] of Object.entries(CREATED) as Array<
    [keyof typeof CREATED, (typeof CREATED)[keyof typeof CREATED]]
  >) {
    const raw = singleParameter(query, param);
    if (raw !== undefined) out[field] = parseTimeBound(raw, param);
  }
  return out;
}

/** A query parameter given once (Fastify hands a repeated one as an array), or undefined. */
export function singleParameter(query: Readonly<Record<string, unknown>>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw validationError(name, `${name} must be given once.`);
  return v;
}

export function oneOfParameter<T extends string>(
  query: Readonly<Record<string, unknown>>,
  name: string,
  values: readonly T[],
): T | undefined {
  const raw = singleParameter(query, name);
  if (raw === undefined) return undefined;
  if (!(values as readonly string[]).includes(raw))
    throw validationError(name, `${name} must be one of ${values.join(', ')}.`);
  return raw as T;
}

export function matchingParameter(
  query: Readonly<Record<string, unknown>>,
  name: string,
  pattern: RegExp,
  what: string,
): string | undefined {
  const raw = singleParameter(query, name);
  if (raw === undefined) return undefined;
  if (!pattern.test(raw)) throw validationError(name, `${name} must be ${what}.`);
  return raw;
}
