/**
 * Branding colors on the hosted pages (SPEC Settings > Branding): background_color tints the page background,
 * the card surface and (only once set) the header bar; primary_color drives buttons and accents. Text colors are
 * chosen automatically: whichever of near-black and white has the higher WCAG contrast ratio on the surface.
 */
export const DEFAULT_BACKGROUND = '#F4F5F7';
export const DEFAULT_PRIMARY = '#2F5BEA';
export const DARK_TEXT = '#111827';
export const LIGHT_TEXT = '#FFFFFF';

function channels(hex: string): [number, number, number] {
  const m = /^#([0-9a-fA-F]{2})([0-9a-fA-F]{2})([0-9a-fA-F]{2})$/.exec(hex);
  if (!m) throw new RangeError(`not a #RRGGBB color: ${hex}`);
  return [parseInt(m[1] ?? '0', 16), parseInt(m[2] ?? '0', 16), parseInt(m[3] ?? '0', 16)];
}

/** WCAG 2.x relative luminance. */
export function relativeLuminance(hex: string): number {
  const [r, g, b] = channels(hex).map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

export function contrastRatio(a: string, b: string): number {
  const [hi, lo] = [relativeLuminance(a), relativeLuminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/**
 * The text color to use on `background`: near-black or white, whichever contrasts more; pure black where even
 * that stays under WCAG AA's 4.5:1 (mid-tones), since black or white always reaches it.
 */
export function textColorOn(background: string): string {
  const best =
    contrastRatio(background, DARK_TEXT) >= contrastRatio(background, LIGHT_TEXT) ? DARK_TEXT : LIGHT_TEXT;
  if (contrastRatio(background, best) >= 4.5) return best;
  return contrastRatio(background, '#000000') >= contrastRatio(background, LIGHT_TEXT)
    ? '#000000'
    : LIGHT_TEXT;
}

/** `weight` of `a` mixed with `b` (0..1), as #RRGGBB. */
export function mix(a: string, b: string, weight: number): string {
  const ca = channels(a);
  const cb = channels(b);
  return `#${ca
    .map((c, i) =>
      Math.round(c * weight + (cb[i] ?? 0) * (1 - weight))
        .toString(16)
        .padStart(2, '0'),
    )
    .join('')
    .toUpperCase()}`;
}

export interface Palette {
  readonly pageBackground: string;
  readonly pageText: string;
  readonly cardBackground: string;
  readonly cardText: string;
  readonly headerBackground: string;
  readonly headerText: string;
  readonly primary: string;
  readonly primaryText: string;
  readonly accentOnCard: string;
}

export function palette(backgroundColor: string | null, primaryColor: string | null): Palette {
  const page = backgroundColor ?? DEFAULT_BACKGROUND;
  const card = backgroundColor ? mix(backgroundColor, '#FFFFFF', 0.12) : '#FFFFFF';
  // The header is tinted only once a background color is set; otherwise it is plain white.
  const header = backgroundColor ?? '#FFFFFF';
  const primary = primaryColor ?? DEFAULT_PRIMARY;
  // Accents (links, the selected option's outline) in the primary color when it reads on the card, else in text color.
  const accent = contrastRatio(primary, card) >= 3 ? primary : textColorOn(card);
  return {
    pageBackground: page,
    pageText: textColorOn(page),
    cardBackground: card,
    cardText: textColorOn(card),
    headerBackground: header,
    headerText: textColorOn(header),
    primary,
    primaryText: textColorOn(primary),
    accentOnCard: accent,
  };
}
