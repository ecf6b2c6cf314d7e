import { isIsoCountryCode, isIsoCurrency, isTwoDecimalIsoCurrency } from './iso-codes';

describe('ISO reference codes', () => {
  it.each(['AR', 'BR', 'DE', 'GB', 'US', 'MX', 'AX', 'SS'])('knows the country %s', (code) =>
    expect(isIsoCountryCode(code)).toBe(true),
  );
  it.each(['ZZ', 'UK', 'EU', 'XK', 'QQ', 'ar', 'ARG', ''])('refuses %j as a country', (code) =>
    expect(isIsoCountryCode(code)).toBe(false),
  );
  it.each(['ARS', 'USD', 'EUR', 'BRL', 'MXN', 'GBP', 'HUF', 'IDR'])(
    'accepts the two-decimal currency %s',
    (code) => expect(isTwoDecimalIsoCurrency(code)).toBe(true),
  );
  it.each(['XYZ', 'usd', 'JPY', 'CLP', 'KWD', 'XDR', 'XTS', 'DEM', ''])(
    'refuses %j as a settlement currency',
    (code) => expect(isTwoDecimalIsoCurrency(code)).toBe(false),
  );
  it.each(['USD', 'EUR', 'JPY', 'KWD', 'ARS'])('knows the currency %s whatever its minor unit', (code) =>
    expect(isIsoCurrency(code)).toBe(true),
  );
  it.each(['XYZ', 'usd', 'XDR', 'XTS', 'DEM', 'US', ''])('refuses %j as a currency', (code) =>
    expect(isIsoCurrency(code)).toBe(false),
  );
});
