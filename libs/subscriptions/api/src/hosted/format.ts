import { formatUnits } from '@stablepay/subscriptions-domain';

/** `1234567` -> `1,234,567` (digits of a non-negative integer string). */
function groupThousands(digits: string): string {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Fiat minor units -> `ARS 1,500.00` (every accepted currency has two decimals). */
export function formatFiat(minor: string, currency: string | null): string {
  const padded = minor.padStart(3, '0');
  const whole = groupThousands(padded.slice(0, -2).replace(/^0+(?=\d)/, ''));
  return `${currency ?? ''} ${whole}.${padded.slice(-2)}`.trim();
}

/** Token smallest units -> `1.265289 USDC`. */
export function formatToken(units: string, decimals: number, symbol: string): string {
  const text = formatUnits(BigInt(units), decimals);
  const [whole = '0', fraction] = text.split('.');
  return `${groupThousands(whole)}${fraction ? `.${fraction}` : ''} ${symbol}`;
}

/** A rate decimal string with grouped thousands: `1185.50` -> `1,185.50`. */
export function formatRate(value: string): string {
  const [whole = '0', fraction] = value.split('.');
  return `${groupThousands(whole)}${fraction ? `.${fraction}` : ''}`;
}

/** Seconds between charges, as a person says it: `every 30 days`, `every week`, `every 2 hours`. */
export function formatPeriod(seconds: number): string {
  const unit = (n: number, singular: string) =>
    n === 1 ? `every ${singular}` : `every ${n.toLocaleString('en-US')} ${singular}s`;
  const day = 86400;
  if (seconds % day === 0) {
    const days = seconds / day;
    if (days % 365 === 0) return unit(days / 365, 'year');
    if (days % 7 === 0) return unit(days / 7, 'week');
    return unit(days, 'day');
  }
  if (seconds % 3600 === 0) return unit(seconds / 3600, 'hour');
  if (seconds % 60 === 0) return unit(seconds / 60, 'minute');
  return unit(seconds, 'second');
}
