import { DomainError } from './errors';
import { requireNoControlCharacters } from './control-characters';

const refusal = (value: string, lineBreaks = false): unknown => {
  try {
    requireNoControlCharacters('field', value, { lineBreaks });
  } catch (error) {
    return error;
  }
  return null;
};

describe('control characters in a string field', () => {
  it.each([
    ['NUL', '\u0000'],
    ['an escape', 'a\u001bb'],
    ['a tab', 'a\tb'],
    ['a line feed', 'a\nb'],
    ['DEL', 'a\u007f'],
    ['the first C1 control', '\u0080'],
    ['NEL', 'a\u0085b'],
    ['the last C1 control', '\u009f'],
  ])('refuses %s in an identifier with 400 invalid_string naming the field', (_what, value) => {
    const error = refusal(value);
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({
      status: 400,
      type: 'validation_error',
      code: 'invalid_string',
      param: 'field',
    });
  });

  it('names the character found', () => {
    expect(refusal('cus_\u008542')).toMatchObject({ message: expect.stringContaining('U+0085 found') });
  });

  it('lets free text keep tabs and line breaks, and nothing else of the controls', () => {
    expect(requireNoControlCharacters('field', 'one\r\ntwo\tthree', { lineBreaks: true })).toBe(
      'one\r\ntwo\tthree',
    );
    expect(refusal('a\u0007b', true)).toMatchObject({ code: 'invalid_string' });
    expect(refusal('a\u000bb', true)).toMatchObject({ code: 'invalid_string' });
    expect(refusal('a\u0085b', true)).toMatchObject({ code: 'invalid_string' });
  });

  it('accepts the characters right past the controls: no-break space, letters of any script, emoji', () => {
    for (const value of ['a\u00a0b', '\u00ffé', 'Zürich 東京 🚀', ' ~'])
      expect(requireNoControlCharacters('field', value)).toBe(value);
  });
});
