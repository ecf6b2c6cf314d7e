import { displayTextFault, hasVisibleCharacter, requireDisplayText } from './display-text';

describe('display text', () => {
  it.each([
    ['empty', ''],
    ['spaces and a tab', ' \t '],
    ['a right-to-left override', '\u202E'],
    ['isolates and embeddings', '\u2066\u2067\u2068\u2069\u202A\u202B\u202C\u202D'],
    ['zero-width characters', '\u200B\u200C\u200D\u2060'],
    ['a lone BOM', '\uFEFF'],
    ['bidi marks', '\u200E\u200F\u061C'],
    ['no-break and ideographic spaces', '\u00A0\u3000\u2007'],
    ['a Hangul filler', '\u3164'],
    ['a blank Braille pattern', '\u2800\u2800'],
    ['variation selectors and a tag character', '\uFE0F\u{E0041}'],
    ['a soft hyphen', '\u00AD'],
    ['the Hangul choseong, jungseong and halfwidth fillers', '\u115F\u1160\uFFA0'],
    ['tag characters spelling a word', '\u{E0041}\u{E0063}\u{E006D}\u{E0065}\u{E007F}'],
    ['ideographic variation selectors', '\u{E0100}\u{E01EF}'],
    ['the Mongolian vowel separator and invisible operators', '\u180E\u2061\u2062\u2063\u2064'],
    ['line and paragraph separators', '\u2028\u2029'],
    ['noncharacters', '\uFFFF\uFDD0\u{10FFFE}'],
    ['the musical null notehead, a symbol drawn as nothing', '\u{1D159}'],
    ['an unassigned code point', '\u0378'],
  ])('refuses %s as having no visible character', (_name, value) => {
    expect(displayTextFault(value)).toMatch(/visible character/);
  });

  it.each([
    ['a lone acute accent', '\u0301'],
    ['stacked combining marks', '\u0300\u0301\u0308\u0327'],
    ['an enclosing circle', '\u20DD'],
    ['a combining mark after a zero-width space', '\u200B\u0301'],
    ['a combining mark after a Hangul filler and a space', '\u3164 \u0308'],
    ['a spacing combining mark', '\u093E'],
  ])('refuses %s: combining marks alone draw on nothing', (_name, value) => {
    expect(hasVisibleCharacter(value)).toBe(false);
    expect(displayTextFault(value)).toMatch(/combining marks/);
  });

  it.each([
    ['a letter with a combining accent', 'Cafe\u0301'],
    ['a Devanagari syllable with a vowel sign', '\u0915\u093E'],
    ['a digit among invisible characters', '\u200B7\u2060'],
    ['a keycap emoji with its variation selector', '1\uFE0F\u20E3'],
  ])('counts %s as visible', (_name, value) => {
    expect(hasVisibleCharacter(value)).toBe(true);
  });

  it.each([
    ['an override inside a name', 'Acme\u202Emoc.live', '202E'],
    ['an embedding', 'A\u202Ab', '202A'],
    ['an isolate', '\u2067Shop\u2069', '2067'],
    ['a line separator between two words', 'a\u2028b', '2028'],
    ['a paragraph separator after a name', 'Acme\u2029', '2029'],
    ['a noncharacter inside a name', 'Ac\uFFFFme', 'FFFF'],
    ['a noncharacter of another plane', 'Acme\u{1FFFF}', '1FFFF'],
  ])('refuses %s, naming the character', (_name, value, code) => {
    expect(displayTextFault(value)).toContain(`U+${code}`);
  });

  it.each([
    ['Latin', 'Acme Coffee'],
    ['Hebrew with a right-to-left mark', 'חנות הקפה\u200F'],
    ['Arabic', 'متجر'],
    ['an emoji with a joiner', '\u{1F469}\u200D\u{1F4BB} Studio'],
    ['a single character', 'x'],
    ['a name beside an unassigned code point (an emoji newer than the tables)', 'Acme \u{1FAFA}'],
  ])('accepts %s', (_name, value) => {
    expect(displayTextFault(value)).toBeNull();
    expect(requireDisplayText('name', value)).toBe(value);
  });

  it('refuses with a 400 validation_error naming the param', () => {
    let thrown: unknown;
    try {
      requireDisplayText('display_name', '\u200B');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ status: 400, type: 'validation_error', param: 'display_name' });
  });
});
