import type { CreateSubscriptionCheckoutInput } from '@stablepay/subscriptions-domain';
import { validationError } from '@stablepay/util';

const AMOUNT =
  'must be a string of digits in minor units of price_currency (for example "150000" for 1,500.00)';

type Shape = 'string' | 'integer' | 'strings' | 'object';

interface Field {
  readonly name: keyof CreateSubscriptionCheckoutInput & string;
  readonly shape: Shape;
  /** When the value has another shape. */
  readonly message: string;
  /** Set when the field is required: the message for an absent or null value. */
  readonly required?: string;
}

/**
 * POST /subscription-checkouts, checked in this order (the first failure is the one reported). Types only;
 * every value rule lives in the SubscriptionCheckout aggregate. `null` means "use the default".
 */
const FIELDS: readonly Field[] = [
  { name: 'price', shape: 'string', message: `price ${AMOUNT}`, required: `price is required and ${AMOUNT}` },
  {
    name: 'price_currency',
    shape: 'string',
    message: 'price_currency must be an ISO-4217 code such as ARS',
    required: 'price_currency is required: an ISO-4217 code such as ARS',
  },
  { name: 'budget', shape: 'string', message: `budget ${AMOUNT}` },
  { name: 'cap', shape: 'string', message: `cap ${AMOUNT}` },
  {
    name: 'period_duration',
    shape: 'integer',
    message: 'period_duration must be an integer number of seconds (at least 3600)',
  },
  {
    name: 'supported_chains',
    shape: 'strings',
    message: 'supported_chains must be an array of CAIP-2 chain ids such as eip155:8453',
  },
  { name: 'metadata', shape: 'object', message: 'metadata must be an object of string values' },
  { name: 'external_customer_id', shape: 'string', message: 'external_customer_id must be a string' },
  { name: 'success_url', shape: 'string', message: 'success_url must be an absolute http(s) URL' },
  { name: 'cancel_url', shape: 'string', message: 'cancel_url must be an absolute http(s) URL' },
  { name: 'return_url', shape: 'string', message: 'return_url must be an absolute http(s) URL' },
  /** Seconds until the intent expires: default 300 (5 minutes), 60 to 86400 (24 hours). */
  {
    name: 'expires_in',
    shape: 'integer',
    message: 'expires_in must be an integer number of seconds (60 to 86400)',
  },
];

const KNOWN = new Set<string>(FIELDS.map((f) => f.name));

function hasShape(shape: Shape, value: unknown): boolean {
  switch (shape) {
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'strings':
      return Array.isArray(value) && value.every((v) => typeof v === 'string');
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
  }
}

/**
 * The body of POST /subscription-checkouts as the aggregate's input: unknown fields are refused first (as Stripe
 * does), then each field's type in FIELDS order, each failure a 400 validation_error naming the field; absent
 * and null fields are left out (defaults apply). A missing body or a JSON primitive counts as `{}`, an array as
 * an object whose keys are its indexes: what the class-validator pipe this replaces answered (a plain function
 * costs a fraction of its per-request CPU on the write path; see docs/benchmarks.md).
 */
export function parseCreateSubscriptionCheckoutBody(body: unknown): CreateSubscriptionCheckoutInput {
  const object = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  for (const key of Object.keys(object))
    if (!KNOWN.has(key)) throw validationError(key, `Received unknown parameter: ${key}`);
  const input: Record<string, unknown> = {};
  for (const field of FIELDS) {
    const value = Object.hasOwn(object, field.name) ? object[field.name] : undefined;
    if (value === undefined || value === null) {
      if (field.required) throw validationError(field.name, field.required);
      continue;
    }
    if (!hasShape(field.shape, value)) throw validationError(field.name, field.message);
    input[field.name] = value;
  }
  return input as CreateSubscriptionCheckoutInput;
}
