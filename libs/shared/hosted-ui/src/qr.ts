import { toString as qrToString } from 'qrcode';

/**
 * A QR code as inline SVG, made on the server (the pages' CSP allows no script to draw one, and an SVG in the
 * markup needs no image source). Presentation attributes only (no style attribute), medium error correction.
 */
export async function qrSvg(text: string): Promise<string> {
  const svg = await qrToString(text, {
    type: 'svg',
    errorCorrectionLevel: 'M',
    margin: 2,
    color: { dark: '#111827', light: '#FFFFFF' },
  });
  // Drop the XML prolog if any: the SVG sits inside HTML.
  return svg.replace(/^<\?xml[^>]*>\s*/, '').trim();
}
