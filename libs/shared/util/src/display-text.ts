import { validationError } from './errors';

/**
 * A character that shows something: not white space, not a default-ignorable code point (zero-width space and
 * joiners, word joiner, bidi marks and controls, a BOM, variation selectors, tag characters, the Hangul fillers
 * U+115F, U+1160, U+3164 and U+FFA0), not another format or control character, not the blank Braille pattern (U+2800,
 * the usual "empty name" trick, and the musical null notehead U+1D159, a symbol drawn as nothing), not a combining
 * mark (a mark draws on the character before it, so marks alone show nothing, or only the dotted circle a font puts
 * under them), and not a code point this runtime's Unicode tables leave unassigned (noncharacters such as U+FFFF and
 * U+FDD0 among them: no font draws them). An unassigned code point beside a visible one is not refused (a newer
 * emoji than the tables know is one), it only does not count.
 */
const VISIBLE =
  /[^\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Cc}\p{Cf}\p{Cn}\p{Z}\p{M}\u2800\u{1D159}]/u;

/** Whether `value` holds at least one character that shows something (`VISIBLE`). */
export function hasVisibleCharacter(value: string): boolean {
  return VISIBLE.test(value);
}

/**
 * Bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder how the text around them
 * reads, so "Acme\u202Emoc.evil" shows as another name (the Trojan Source trick). The bidi marks U+200E, U+200F and
 * U+061C stay allowed: they change only how neutral characters next to them lean, which names mixing scripts need.
 */
const BIDI_CONTROL = /[\u202A-\u202E\u2066-\u2069]/u;

/**
 * Line and paragraph separators (U+2028, U+2029) break a one-line name wherever it is shown (and were line breaks
 * inside JavaScript strings before ES2019); noncharacters (U+FDD0-U+FDEF and the last two of every plane) are
 * reserved for a program's internal use and never interchanged text. Neither is a control character (\p{Cc}), so the
 * callers' control rules let them through.
 */
const SEPARATOR_OR_NONCHARACTER = /[\u2028\u2029\p{Noncharacter_Code_Point}]/u;

function codeOf(character: string): string {
  return (character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
}
const BIDI_CONTROLS = new RegExp(BIDI_CONTROL.source, 'gu');

/**
 * `value` without bidi embeddings, overrides and isolates: for rendering text stored before `requireDisplayText`
 * refused them (a page must not show a name reordered into another).
 */
export function withoutBidiControls(value: string): string {
  return value.replace(BIDI_CONTROLS, '');
}

/**
 * Why `value` is not fit to show a person (a payer on a hosted page, a merchant in a dashboard), or null: it has no
 * visible character, or it holds a bidi control. Length and control characters are each caller's own rule.
 */
export function displayTextFault(value: string): string | null {
  if (!hasVisibleCharacter(value))
    return 'must contain a visible character, not only spaces, invisible characters or combining marks';
  const separator = SEPARATOR_OR_NONCHARACTER.exec(value)?.[0];
  if (separator !== undefined)
    return /[\u2028\u2029]/u.test(separator)
      ? `must not contain line or paragraph separators (U+${codeOf(separator)} found): the pages show it as one line`
      : `must not contain noncharacters (U+${codeOf(separator)} found): they are not text and no font draws them`;
  const bidi = BIDI_CONTROL.exec(value)?.[0];
  if (bidi !== undefined) {
    return `must not contain bidirectional control characters (U+${codeOf(bidi)} found): they reorder how the text reads`;
  }
  return null;
}

/**
 * `value` when it is fit to show a person (`displayTextFault`), else 400 validation_error naming `param`: the one rule
 * every human-facing string of the API goes through (names, display names, references, plan texts).
 */
export function requireDisplayText(param: string, value: string): string {
  const fault = displayTextFault(value);
  if (fault === null) return value;
  // Nothing visible is Stripe's parameter_invalid_string_blank; a character the field may not hold (a separator, a
  // noncharacter, a bidi control) is invalid_string, as a NUL or a control character is.
  throw validationError(
    param,
    `${param} ${fault}.`,
    hasVisibleCharacter(value) ? 'invalid_string' : 'parameter_invalid_string_blank',
  );
}
