import { ConfigError, envBool, envEnum, envInt, envString } from './config';

describe('typed environment', () => {
  it('names the missing variable', () => {
    expect(() => envString({}, 'DATABASE_URL')).toThrow(
      new ConfigError('environment variable DATABASE_URL is required'),
    );
  });
  it('rejects a non-integer and an out-of-range integer', () => {
    expect(() => envInt({ PORT: 'abc' }, 'PORT')).toThrow(/PORT must be an integer/);
    expect(() => envInt({ PORT: '70000' }, 'PORT', 3000, 0, 65535)).toThrow(/between 0 and 65535/);
    expect(envInt({}, 'PORT', 3000)).toBe(3000);
  });
  it('parses booleans strictly', () => {
    expect(envBool({ X: 'true' }, 'X')).toBe(true);
    expect(() => envBool({ X: 'yes' }, 'X')).toThrow(/true or false/);
  });
  it('accepts only listed values', () => {
    expect(envEnum({ M: 'live' }, 'M', ['test', 'live'] as const)).toBe('live');
    expect(() => envEnum({ M: 'prod' }, 'M', ['test', 'live'] as const)).toThrow(/one of test, live/);
  });
});
