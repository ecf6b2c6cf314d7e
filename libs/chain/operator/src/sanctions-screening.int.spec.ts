import { createServer, type Server } from 'node:http';
import { SandboxSanctionsScreening } from '@stablepay/evm';
import { ConfigError } from '@stablepay/util';
import {
  ChainalysisSanctionsScreening,
  sanctionsScreening,
  sanctionsScreeningConfigFromEnv,
} from './sanctions-screening';

const SANCTIONED = '0x1da5821544e25c636c1417ba96ade4cf6d2f9b5a';
const CLEAR = '0x1111111111111111111111111111111111111111';
const PROVIDER_ERROR = '0x2222222222222222222222222222222222222222';
const NO_IDENTIFICATIONS = '0x3333333333333333333333333333333333333333';
const KEY = 'test-api-key';

/** A local stand-in for the Chainalysis sanctions API, answering as its reference documents. */
describe('ChainalysisSanctionsScreening against a local server speaking the Chainalysis sanctions API', () => {
  let server: Server;
  let url: string;
  const requests: Array<{ path: string; key: string | undefined }> = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const key = req.headers['x-api-key'];
      requests.push({ path: req.url ?? '', key: typeof key === 'string' ? key : undefined });
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (key !== KEY) return json(403, { message: 'Forbidden' });
      const address = (req.url ?? '').replace('/api/v1/address/', '').toLowerCase();
      if (address === SANCTIONED)
        return json(200, {
          identifications: [
            { category: 'sanctions', name: 'SANCTIONS: OFAC SDN', description: 'listed', url: 'https://x' },
          ],
        });
      if (address === PROVIDER_ERROR) return json(503, { message: 'unavailable' });
      if (address === NO_IDENTIFICATIONS) return json(200, { message: 'ok' });
      return json(200, { identifications: [] });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    url = `http://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const screening = (apiKey = KEY) =>
    new ChainalysisSanctionsScreening({ apiUrl: url, apiKey, timeoutMs: 5000 });

  it('asks GET /api/v1/address/{address} with X-API-Key; an empty identifications list is clear', async () => {
    requests.length = 0;
    expect(await screening().screen([CLEAR])).toEqual({ kind: 'clear' });
    expect(requests).toEqual([{ path: `/api/v1/address/${CLEAR}`, key: KEY }]);
  });

  it('any identification is a match, naming the address (checksummed), even when another address is unreachable', async () => {
    expect(await screening().screen([PROVIDER_ERROR, CLEAR, SANCTIONED])).toEqual({
      kind: 'match',
      address: '0x1da5821544e25c636c1417Ba96Ade4Cf6D2f9B5A',
    });
  });

  it('a provider error, a rejected key, a body without identifications or no server at all is unreachable', async () => {
    expect(await screening().screen([CLEAR, PROVIDER_ERROR])).toEqual({ kind: 'unreachable' });
    expect(await screening('wrong-key').screen([CLEAR])).toEqual({ kind: 'unreachable' });
    expect(await screening().screen([NO_IDENTIFICATIONS])).toEqual({ kind: 'unreachable' });
    const gone = new ChainalysisSanctionsScreening({
      apiUrl: 'http://127.0.0.1:1',
      apiKey: KEY,
      timeoutMs: 5000,
    });
    expect(await gone.screen([CLEAR])).toEqual({ kind: 'unreachable' });
  });

  it('is what SANCTIONS_SCREENING_PROVIDER=chainalysis configures', async () => {
    const config = sanctionsScreeningConfigFromEnv({
      SANCTIONS_SCREENING_PROVIDER: 'chainalysis',
      CHAINALYSIS_API_KEY: KEY,
      CHAINALYSIS_API_URL: url,
    });
    expect(config).toEqual({ provider: 'chainalysis', apiUrl: url, apiKey: KEY, timeoutMs: 5000 });
    const adapter = sanctionsScreening(config);
    expect(adapter).toBeInstanceOf(ChainalysisSanctionsScreening);
    expect(await adapter.screen([SANCTIONED])).toMatchObject({ kind: 'match' });
  });
});

describe('sanctionsScreeningConfigFromEnv', () => {
  it('the sandbox by default', () => {
    expect(sanctionsScreeningConfigFromEnv({})).toEqual({ provider: 'sandbox' });
    expect(sanctionsScreening(sanctionsScreeningConfigFromEnv({}))).toBeInstanceOf(SandboxSanctionsScreening);
  });

  it('chainalysis: the public API by default; the key is required and never printed', () => {
    expect(
      sanctionsScreeningConfigFromEnv({
        SANCTIONS_SCREENING_PROVIDER: 'chainalysis',
        CHAINALYSIS_API_KEY: 'k',
      }),
    ).toMatchObject({ apiUrl: 'https://public.chainalysis.com' });
    expect(() => sanctionsScreeningConfigFromEnv({ SANCTIONS_SCREENING_PROVIDER: 'chainalysis' })).toThrow(
      /CHAINALYSIS_API_KEY/,
    );
    expect(() =>
      sanctionsScreeningConfigFromEnv({
        SANCTIONS_SCREENING_PROVIDER: 'chainalysis',
        CHAINALYSIS_API_KEY: 'secret-key',
        CHAINALYSIS_API_URL: 'ftp://x',
      }),
    ).toThrow(expect.objectContaining({ message: expect.not.stringContaining('secret-key') }));
  });

  it('refuses an unknown provider, naming the variable', () => {
    expect(() => sanctionsScreeningConfigFromEnv({ SANCTIONS_SCREENING_PROVIDER: 'trm' })).toThrow(
      ConfigError,
    );
    expect(() => sanctionsScreeningConfigFromEnv({ SANCTIONS_SCREENING_PROVIDER: 'trm' })).toThrow(
      /SANCTIONS_SCREENING_PROVIDER/,
    );
  });
});
