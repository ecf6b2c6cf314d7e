import { validationError } from './errors';

// C0 controls, DEL and C1 controls (U+0080-U+009F): NUL included.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/u;
// The same but tab, line feed and carriage return: what free text such as a metadata value may hold.
// eslint-disable-next-line no-control-regex
const CONTROL_BUT_LINE_BREAKS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/u;

export interface ControlCharacterRule {
  /**
   * Free text (a metadata value): tab, line feed and carriage return are allowed, as Stripe allows them in a
   * description or a metadata value. Without it the field is an identifier or a one-line name: no control at all.
   */
  readonly lineBreaks?: boolean;
}

function codeOf(character: string): string {
  return (character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
}

/**
 * `value` when it holds no control character the field may not hold, else 400 validation_error code `invalid_string`
 * naming `param`, the answer a NUL in any string gets. Control characters are refused where they are stored because
 * nothing that reads the value back shows them: a merchant's reference for a customer with an escape sequence in it
 * rewrites the terminal a support engineer reads logs in, one with a BEL or a C1 control splits or garbles the CSV
 * export and the dashboard, and two ids that differ only by an invisible control look the same to the people who
 * must tell them apart.
 */
export function requireNoControlCharacters(
  param: string,
  value: string,
  rule: ControlCharacterRule = {},
): string {
  const found = (rule.lineBreaks ? CONTROL_BUT_LINE_BREAKS : CONTROL).exec(value)?.[0];
  if (found === undefined) return value;
  throw validationError(
    param,
    rule.lineBreaks
      ? `${param} must not contain control characters other than tab and line breaks (U+${codeOf(found)} found).`
      : `${param} must not contain control characters (tab, line break, NUL, ...; U+${codeOf(found)} found).`,
    'invalid_string',
  );
}
