import { validationError } from './errors';

/**
 * The instants a timestamp parameter may name: 1970-01-01T00:00:00Z up to 9999-12-31T23:59:59.999Z. Nothing in the
 * service is older than the Unix epoch, and four-digit years are what ISO 8601 / RFC 3339 write without an
 * extension; both bounds sit well inside what a JS Date and a PostgreSQL timestamptz hold (year 0 and offsets that
 * push year 1 back into year 0 made PostgreSQL refuse the query: a 500 instead of a 400).
 */
export const TIMESTAMP_MIN = new Date('1970-01-01T00:00:00Z');
export const TIMESTAMP_MAX = new Date('9999-12-31T23:59:59.999Z');

export interface TimestampForms {
  /** Also accept Unix seconds (1 to 11 digits). */
  readonly unixSeconds?: boolean;
  /** Also accept a date alone (`2026-06-01`), read as midnight UTC. */
  readonly dateOnly?: boolean;
}

/** What the `created[gte|gt|lte|lt]` list filters accept besides a date-time (Stripe's forms). */
export const CREATED_BOUND_FORMS: TimestampForms = { unixSeconds: true, dateOnly: true };

// RFC 3339 date-time, with seconds optional (`2026-06-01T00:00Z` was accepted before and still is); fractions
// beyond milliseconds are accepted and truncated, as a JS Date cannot hold them.
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|([+-])(\d{2}):(\d{2})))?$/;
// Twelve digits reach 9999-12-31T23:59:59Z (253402300799): eleven refused the last 7,000 years of the documented
// range as malformed. More would be refused by the range check anyway; past 8.64e12 seconds a Date is invalid (NaN
// passes every comparison), so they stay malformed here.
const UNIX_SECONDS = /^[0-9]{1,12}$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * The one rule for timestamp parameters (list filters): an RFC 3339 date-time with a time zone, calendar-valid
 * (2026-02-29 and 2026-02-30 are refused, not rolled over), naming an instant between TIMESTAMP_MIN and
 * TIMESTAMP_MAX; optionally also Unix seconds or a date alone. Anything else is 400 validation_error on `param`.
 */
export function parseTimestampParam(value: unknown, param: string, forms: TimestampForms = {}): Date {
  const example = 'for example 2026-06-01T00:00:00Z';
  const shape = [
    forms.unixSeconds ? 'Unix seconds' : null,
    'an ISO 8601 / RFC 3339 date-time with a time zone',
    forms.dateOnly ? 'a date (midnight UTC)' : null,
  ]
    .filter((s) => s !== null)
    .join(' or ');
  const malformed = () => validationError(param, `${param} must be ${shape} (${example}).`);
  if (typeof value !== 'string') throw malformed();
  let at: Date;
  if (forms.unixSeconds && UNIX_SECONDS.test(value)) {
    at = new Date(Number(value) * 1000);
  } else {
    const m = DATE_TIME.exec(value);
    if (!m) throw malformed();
    const [, y, mo, d, h, mi, s, frac, , sign, oh, om] = m;
    if (h === undefined && !forms.dateOnly) throw malformed();
    const year = Number(y);
    const month = Number(mo);
    const day = Number(d);
    const hour = Number(h ?? 0);
    const minute = Number(mi ?? 0);
    const second = Number(s ?? 0);
    const offsetHours = Number(oh ?? 0);
    const offsetMinutes = Number(om ?? 0);
    if (
      month < 1 ||
      month > 12 ||
      day < 1 ||
      day > daysInMonth(year, month) ||
      hour > 23 ||
      minute > 59 ||
      second > 59 ||
      offsetHours > 23 ||
      offsetMinutes > 59
    )
      throw validationError(param, `${param} is not a date and time that exists (${JSON.stringify(value)}).`);
    const utc = new Date(0);
    // setUTCFullYear, not Date.UTC: Date.UTC maps years 0-99 to 1900-1999.
    utc.setUTCFullYear(year, month - 1, day);
    utc.setUTCHours(hour, minute, second, Number((frac ?? '').padEnd(3, '0').slice(0, 3)));
    const offsetMs = (sign === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
    at = new Date(utc.getTime() - offsetMs);
  }
  if (at.getTime() < TIMESTAMP_MIN.getTime() || at.getTime() > TIMESTAMP_MAX.getTime())
    throw validationError(
      param,
      `${param} must name an instant from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z (${JSON.stringify(value)} does not).`,
    );
  return at;
}
