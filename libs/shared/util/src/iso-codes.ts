import { validationError } from './errors';
import { fieldFault } from './request-fields';

/**
 * ISO 3166-1 alpha-2: the 249 officially assigned country codes (ISO 3166 Maintenance Agency, checked in: neither
 * Intl nor a dependency lists regions). User-assigned and reserved codes (XK, EU, UN, ZZ, ...) are not countries a
 * bank account can be in.
 */
const ISO_3166_ALPHA2 = new Set(
  (
    'AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ ' +
    'CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO ' +
    'FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE ' +
    'JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO ' +
    'MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW ' +
    'PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM ' +
    'TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW'
  ).split(' '),
);

/** True for an officially assigned ISO 3166-1 alpha-2 code, upper case. */
export function isIsoCountryCode(code: string): boolean {
  return ISO_3166_ALPHA2.has(code);
}

// Units of account, not money a bank pays out: the IMF's special drawing right and the ALBA SUCRE.
const NOT_PAID_OUT = new Set(['XDR', 'XSU']);
// ISO 4217 minor units other than two (Intl's fraction digits are CLDR's display rules, not ISO's: HUF shows 0).
const NOT_TWO_DECIMALS = new Set([
  ...['BIF', 'CLP', 'DJF', 'GNF', 'ISK', 'JPY', 'KMF', 'KRW', 'PYG', 'RWF', 'UGX', 'UYI', 'VND', 'VUV'],
  ...['XAF', 'XOF', 'XPF'],
  ...['BHD', 'IQD', 'JOD', 'KWD', 'LYD', 'OMR', 'TND', 'CLF', 'UYW'],
]);
// The runtime's ICU list of ISO 4217 currencies in use (historic ones such as DEM are not in it).
const IN_USE = new Set(Intl.supportedValuesOf('currency'));

/** True for an ISO 4217 currency in use, upper case, that is money (not a unit of account such as XDR). */
export function isIsoCurrency(code: string): boolean {
  return IN_USE.has(code) && !NOT_PAID_OUT.has(code);
}

/**
 * A request's currency code: an ISO 4217 currency in use (isIsoCurrency), any case, returned upper case; else 400
 * validation_error on `param` saying what arrived (any three letters used to pass, and a made-up code was answered
 * as a real currency nothing quotes or is pegged to). `alsoAccept`: codes a field takes besides, upper case.
 */
export function parseIsoCurrency(
  value: unknown,
  param: string,
  example: string,
  alsoAccept: readonly string[] = [],
): string {
  const code = typeof value === 'string' ? value.toUpperCase() : '';
  if (!isIsoCurrency(code) && !alsoAccept.includes(code))
    throw validationError(
      param,
      fieldFault(param, value, `an ISO-4217 currency code in use (for example ${example})`),
    );
  return code;
}

/**
 * True for an ISO 4217 currency in use, upper case, whose minor unit is a hundredth: SPEC prices fiat in hundredths
 * and "every currency accepted today has two decimals", so a zero- or three-decimal currency would be mispriced.
 */
export function isTwoDecimalIsoCurrency(code: string): boolean {
  return isIsoCurrency(code) && !NOT_TWO_DECIMALS.has(code);
}
