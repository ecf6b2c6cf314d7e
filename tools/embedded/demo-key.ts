import { generateApiKey, parseApiKey } from '@stablepay/http';
import { ConfigError } from '@stablepay/util';
import { createWhole, readDataFile } from './data-files';

export function requireDemoKey(apiKey: string): void {
  if (parseApiKey(apiKey)?.mode !== 'test') {
    throw new ConfigError(
      'environment variable DEMO_API_KEY must be a test key: sk_test_ followed by 24 to 128 letters and digits',
    );
  }
}

/**
 * The demo merchant and its key: DEMO_API_KEY, else the key remembered in `keyFile`, else a new one. `find` answers
 * the merchant a key authenticates, `create` makes the demo merchant with that key.
 *
 * A new key is remembered before the merchant is created: a start killed after the create and before the file was
 * written left a merchant no file named, and the next start made a second demo merchant. Now the next start finds
 * the key and either that merchant or none yet, and creates it with that key.
 */
export async function demoMerchant(options: {
  readonly envKey: string | undefined;
  readonly keyFile: string | undefined;
  readonly find: (apiKey: string) => Promise<string | undefined>;
  readonly create: (apiKey: string) => Promise<string>;
}): Promise<{ merchantId: string; apiKey: string }> {
  const remembered = options.envKey ?? (options.keyFile ? readDataFile(options.keyFile) : undefined);
  if (remembered !== undefined) requireDemoKey(remembered);
  const existing = remembered ? await options.find(remembered) : undefined;
  if (existing !== undefined && remembered) return { merchantId: existing, apiKey: remembered };
  const apiKey = remembered ?? generateApiKey('test');
  if (remembered === undefined && options.keyFile)
    createWhole(options.keyFile, `${apiKey}\n`, { mode: 0o600 });
  return { merchantId: await options.create(apiKey), apiKey };
}
