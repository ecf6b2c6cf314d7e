import { contrastRatio, DARK_TEXT, LIGHT_TEXT, palette, textColorOn } from './colors';
import { escapeHtml, jsonForScript } from './html';

describe('branding colors: text chosen automatically for contrast', () => {
  it('picks light text on dark surfaces and dark text on light ones', () => {
    expect(textColorOn('#0B1F3A')).toBe(LIGHT_TEXT);
    expect(textColorOn('#FFB000')).toBe(DARK_TEXT);
    expect(textColorOn('#FFFFFF')).toBe(DARK_TEXT);
    expect(textColorOn('#000000')).toBe(LIGHT_TEXT);
  });
  it('always reaches at least 4.5:1 on the chosen pairs', () => {
    // Every 6-bit-per-channel color, mid-tones included (where near-black alone would fall short).
    const hex = (n: number) => (n * 85).toString(16).padStart(2, '0');
    for (let r = 0; r < 4; r++) {
      for (let g = 0; g < 4; g++) {
        for (let b = 0; b < 4; b++) {
          const p = palette(`#${hex(r)}${hex(g)}${hex(b)}`, `#${hex(b)}${hex(r)}${hex(g)}`);
          expect(contrastRatio(p.pageBackground, p.pageText)).toBeGreaterThanOrEqual(4.5);
          expect(contrastRatio(p.cardBackground, p.cardText)).toBeGreaterThanOrEqual(4.5);
          expect(contrastRatio(p.headerBackground, p.headerText)).toBeGreaterThanOrEqual(4.5);
          expect(contrastRatio(p.primary, p.primaryText)).toBeGreaterThanOrEqual(4.5);
        }
      }
    }
    for (const bg of ['#777777', '#767676', '#808080', '#2F5BEA', '#FF0000'])
      expect(contrastRatio(bg, textColorOn(bg))).toBeGreaterThanOrEqual(4.5);
  });
  it('tints the header only once a background color is set', () => {
    expect(palette(null, null).headerBackground).toBe('#FFFFFF');
    expect(palette('#123456', null).headerBackground).toBe('#123456');
  });
});

describe('escaping', () => {
  it('drops bidi overrides, embeddings and isolates a stored name could hold, keeping bidi marks', () => {
    expect(escapeHtml('Acme\u202Emoc.lapyap\u202C')).toBe('Acmemoc.lapyap');
    expect(escapeHtml('\u2067<b>\u2069\u202A')).toBe('&lt;b&gt;');
    expect(escapeHtml('שלום\u200F Shop')).toBe('שלום\u200F Shop');
  });

  it('escapes HTML and JSON for script islands', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    expect(jsonForScript({ a: '</script>\u2028' })).toBe('{"a":"\\u003c/script\\u003e\\u2028"}');
  });
});
