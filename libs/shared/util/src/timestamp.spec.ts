import { CREATED_BOUND_FORMS, parseTimestampParam } from './timestamp';

const refusal = (value: unknown, forms = CREATED_BOUND_FORMS): unknown => {
  try {
    parseTimestampParam(value, 'at', forms);
  } catch (e) {
    return e;
  }
  return undefined;
};

describe('parseTimestampParam (the one rule for timestamp parameters)', () => {
  it.each([
    ['2026-06-01T10:00:00Z', '2026-06-01T10:00:00.000Z'],
    ['2026-06-01T10:00Z', '2026-06-01T10:00:00.000Z'],
    ['2026-06-01T10:00:00.123456789+02:00', '2026-06-01T08:00:00.123Z'],
    ['2028-02-29T00:00:00-03:30', '2028-02-29T03:30:00.000Z'],
    ['1970-01-01T00:00:00Z', '1970-01-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
  ])('reads %s as %s', (value, iso) => {
    expect(parseTimestampParam(value, 'at').toISOString()).toBe(iso);
  });

  it('reads Unix seconds and a date alone only where the parameter allows them', () => {
    expect(parseTimestampParam('1780000000', 'at', CREATED_BOUND_FORMS)).toEqual(new Date(1_780_000_000_000));
    expect(parseTimestampParam('2026-06-01', 'at', CREATED_BOUND_FORMS)).toEqual(
      new Date('2026-06-01T00:00:00Z'),
    );
    expect(parseTimestampParam('253402300799', 'at', CREATED_BOUND_FORMS)).toEqual(
      new Date('9999-12-31T23:59:59Z'),
    );
    expect(refusal('1780000000', {})).toMatchObject({ param: 'at' });
    expect(refusal('2026-06-01', {})).toMatchObject({ param: 'at' });
  });

  it.each([
    '2026-02-29T00:00:00Z',
    '2026-02-30',
    '2026-04-31T00:00:00Z',
    '2026-13-01',
    '2026-06-01T24:00:00Z',
    '2026-06-01T10:60:00Z',
    '2026-06-01T10:00:60Z',
    '2026-06-01T10:00:00+24:00',
    '1900-02-29',
  ])('refuses %s, which no calendar has, instead of rolling it over', (value) => {
    expect(refusal(value)).toMatchObject({
      status: 400,
      type: 'validation_error',
      param: 'at',
      message: expect.stringContaining('exists'),
    });
  });

  it.each([
    '0000-01-01T00:00:00Z',
    '0001-01-01T00:00:00+01:00',
    '1969-12-31T23:59:59Z',
    '1970-01-01T00:30:00+01:00',
    '9999-12-31T23:59:59-00:01',
    '253402300800',
    '999999999999',
  ])('refuses %s, outside 1970 to 9999 in UTC', (value) => {
    expect(refusal(value)).toMatchObject({
      status: 400,
      param: 'at',
      message: expect.stringContaining('from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z'),
    });
  });

  it.each([
    'soon',
    '',
    ' 2026-06-01T00:00:00Z',
    '2026-06-01T00:00:00',
    '2026-6-1T00:00:00Z',
    '+002026-06-01T00:00:00Z',
    5,
  ])('refuses the malformed %j', (value) => {
    expect(refusal(value)).toMatchObject({
      status: 400,
      param: 'at',
      message: expect.stringContaining('at must be'),
    });
  });
});
