import { isIP } from 'node:net';
import {
  canonicalIp,
  HostResolutionError,
  type HostResolver,
  isLoopbackAddress,
  isPublicAddress,
} from '@stablepay/node-util';
import { requireNoControlCharacters, validationError } from '@stablepay/util';

const BLOCKED_NAMES =
  /(^|\.)(localhost|local|internal|localdomain|home\.arpa)$|^metadata(\.google\.internal)?$/i;

/**
 * SPEC: the webhook URL must be a publicly reachable HTTPS address. Checked here when it is saved (literal
 * private/loopback/link-local/metadata addresses, IPv4-mapped IPv6 included, and names that resolve to them);
 * the dispatcher checks again at send time, so a DNS change later cannot slip through either.
 * A name that does not resolve now is accepted: it may be published later, and delivery re-checks it. A name
 * whose DNS does not answer within the resolver's deadline is refused (400, param `webhook_url`): saving it would
 * be a guess, and the merchant can retry once their DNS answers.
 */
export async function validateWebhookUrl(
  raw: string,
  allowLocal: boolean,
  dns: Pick<HostResolver, 'resolve'>,
): Promise<string> {
  // The URL parser drops tabs and line breaks without a word: the address saved would not be the one sent.
  requireNoControlCharacters('webhook_url', raw);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw validationError('webhook_url', 'webhook_url must be an absolute URL.');
  }
  if (raw.length > 2048) throw validationError('webhook_url', 'webhook_url must be at most 2048 characters.');
  // The URL parser takes port 0 (":0", ":00"), which no server listens on: every delivery would fail to connect.
  if (url.port === '0')
    throw validationError(
      'webhook_url',
      'webhook_url must name a port from 1 to 65535 (port 0 receives nothing).',
    );
  if (url.username || url.password)
    throw validationError('webhook_url', 'webhook_url must not contain credentials.');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const literal = isIP(canonicalIp(host)) !== 0;
  const loopbackAllowed = allowLocal && (literal ? isLoopbackAddress(host) : /^localhost$/i.test(host));
  if (url.protocol !== 'https:' && !(loopbackAllowed && url.protocol === 'http:')) {
    throw validationError('webhook_url', 'webhook_url must use https.');
  }
  if (loopbackAllowed) return url.toString();
  if (literal) {
    if (!isPublicAddress(host))
      throw validationError(
        'webhook_url',
        'webhook_url must be publicly reachable: private, loopback, link-local and metadata addresses are not allowed.',
      );
    return url.toString();
  }
  // A fully qualified name's trailing dot names the same host: `localhost.` is localhost.
  const name = host.replace(/\.$/, '');
  if (BLOCKED_NAMES.test(name) || !name.includes('.')) {
    throw validationError(
      'webhook_url',
      'webhook_url must be publicly reachable: local host names are not allowed.',
    );
  }
  let addresses: Array<{ address: string }> = [];
  try {
    addresses = await dns.resolve(host);
  } catch (error) {
    if (error instanceof HostResolutionError && error.timedOut)
      throw validationError(
        'webhook_url',
        `webhook_url's host ${host} did not resolve in time: its DNS servers did not answer; retry once they do.`,
        'webhook_url_dns_timeout',
      );
    addresses = [];
  }
  if (addresses.some((a) => !isPublicAddress(a.address))) {
    throw validationError(
      'webhook_url',
      `webhook_url must be publicly reachable: ${host} resolves to a private or reserved address.`,
    );
  }
  return url.toString();
}
