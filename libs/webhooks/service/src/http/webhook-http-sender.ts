import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher } from 'undici';
import { HostResolutionError } from '@stablepay/node-util';
import type { AttemptOutcome } from '@stablepay/webhooks-domain';
import {
  BlockedAddressError,
  checkWebhookTarget,
  type EgressPolicy,
  type ResolveAll,
  vettedLookup,
} from './egress-policy';

export interface WebhookHttpRequest {
  readonly url: string;
  /** The exact bytes that were signed. */
  readonly body: Buffer;
  readonly headers: Readonly<Record<string, string>>;
  /** SPEC rule 1: the status must arrive within this (10 s in production). */
  readonly timeoutMs: number;
}

export interface WebhookHttpSenderOptions extends EgressPolicy {
  /** Response bytes read at most; a longer body is cut and its connection dropped. */
  readonly maxResponseBytes: number;
  /** Response bytes kept for the attempt record. */
  readonly excerptBytes: number;
  /**
   * DNS resolution: the shared `HostResolver` (c-ares, WEBHOOK_DNS_TIMEOUT_MS); tests inject answers to prove the
   * address filter and the pinning.
   */
  readonly resolveAll: ResolveAll;
  /** Idle keep-alive sockets are closed after this, below the 5 s most servers use, so a reused one is rarely stale. */
  readonly idleSocketMs?: number;
}

/**
 * A connection not made by then is given up (SPEC: the response deadline, 10 s). The attempt's own timer reports
 * its timeout at its deadline whatever this is; this only bounds how long a hanging connect holds a socket after.
 */
const MAX_CONNECT_MS = 10_000;

const DNS_CODES = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NODATA',
  'ENODATA',
  'ESERVFAIL',
  'ENONAME',
]);

function errorCode(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string')
    return error.code;
  return error instanceof Error ? error.message : 'unknown';
}

function isTlsCode(code: string): boolean {
  return (
    code === 'EPROTO' ||
    /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|ERR_OSSL)/.test(code)
  );
}

/** What a checked URL needs for a request, worked out once per URL string (see `targets`). */
type Target =
  | { readonly ok: false; readonly code: 'invalid_url' | 'blocked_address'; readonly detail: string }
  | {
      readonly ok: true;
      /** `scheme://host:port` of the connection: the vetted literal address, or the name `lookup` resolves. */
      readonly origin: string;
      readonly path: string;
      /** The Host header: the URL's host, whatever address the connection goes to. */
      readonly host: string;
      /** TLS SNI: the name for names, none for literal addresses. */
      readonly servername: string | undefined;
    };

function targetOf(raw: string, policy: EgressPolicy): Target {
  const checked = checkWebhookTarget(raw, policy);
  if (!checked.ok) return checked;
  const { url, literal, hostname } = checked;
  const secure = url.protocol === 'https:';
  const port = url.port ? Number(url.port) : secure ? 443 : 80;
  const address = literal ? (literal.family === 6 ? `[${literal.address}]` : literal.address) : url.hostname;
  return {
    ok: true,
    origin: `${url.protocol}//${address}:${port}`,
    path: `${url.pathname}${url.search}`,
    host: url.host,
    servername: secure && !literal ? hostname : undefined,
  };
}

/**
 * The one HTTP client of webhook deliveries: POST only, redirects never followed (a 3xx is returned as is and
 * counts as a failure), the SSRF egress policy applied on every attempt with the vetted address pinned through
 * `lookup` on every connection, one deadline for connect + TLS + status line, the response read up to a small
 * limit (never logged), and keep-alive connections so a busy endpoint is not re-handshaken for every event.
 *
 * undici's Agent (one pool of keep-alive connections per origin, one request at a time per connection: no
 * pipelining) rather than node:http: it costs this process about half the CPU per request (a backlog drain was
 * bounded by the dispatcher's CPU per delivery; docs/benchmarks.md).
 */
export class WebhookHttpSender {
  private readonly agent: Agent;
  /**
   * The checked target by URL: a pure function of the URL and the policy (no resolution happens in it; names are
   * resolved and vetted by `lookup` on every connection), and parsing it was ~5% of a delivery's CPU.
   */
  private readonly targets = new Map<string, Target>();

  constructor(private readonly options: WebhookHttpSenderOptions) {
    const idle = options.idleSocketMs ?? 4_000;
    this.agent = new Agent({
      // A server's Keep-Alive hint may shorten the idle time, never lengthen it: a reused socket is rarely stale.
      keepAliveTimeout: idle,
      keepAliveMaxTimeout: idle,
      pipelining: 1,
      // The deadline of each request is this sender's own timer (connect + TLS + status line together).
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: {
        lookup: vettedLookup(options, options.resolveAll),
        timeout: MAX_CONNECT_MS,
      },
    });
  }

  send(request: WebhookHttpRequest): Promise<AttemptOutcome> {
    let target = this.targets.get(request.url);
    if (target === undefined) {
      target = targetOf(request.url, this.options);
      if (this.targets.size >= 10_000) this.targets.clear();
      this.targets.set(request.url, target);
    }
    if (!target.ok) return Promise.resolve({ kind: 'refused', code: target.code, detail: target.detail });
    return this.once(target, request);
  }

  close(): void {
    void this.agent.destroy().catch(() => undefined);
  }

  /**
   * No transparent resend, not even on a reused keep-alive socket that fails: the receiver may have read the
   * request before closing, and a resend would be a second delivery on purpose (undici retries nothing it has
   * written when there is no pipelining). The schedule retries instead; idle sockets are closed early
   * (`idleSocketMs`) so a stale one is rare.
   */
  private once(target: Extract<Target, { ok: true }>, request: WebhookHttpRequest): Promise<AttemptOutcome> {
    return new Promise<AttemptOutcome>((resolve) => {
      const started = performance.now();
      const { excerptBytes, maxResponseBytes } = this.options;
      let settled = false;
      let status = 0;
      let controller: Dispatcher.DispatchController | undefined;
      let excerpt: Buffer[] | undefined;
      let excerptLength = 0;
      let received = 0;
      const abort = () => {
        if (controller && !controller.aborted) controller.abort(new Error('webhook attempt finished'));
      };
      const finish = (outcome: AttemptOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const finishResponse = () =>
        finish({
          kind: 'response',
          status,
          durationMs: performance.now() - started,
          bodyExcerpt: excerpt === undefined ? '' : Buffer.concat(excerpt).toString('utf8'),
        });
      const timer = setTimeout(() => {
        // A status that came in time is what counts; the rest of the body is not waited for.
        if (status !== 0) finishResponse();
        else finish({ kind: 'timeout', durationMs: performance.now() - started });
        abort();
      }, request.timeoutMs);
      const headers: Record<string, string> = { ...request.headers, host: target.host };
      this.agent.dispatch(
        {
          origin: target.origin,
          path: target.path,
          method: 'POST',
          headers,
          body: request.body,
          ...(target.servername !== undefined ? { servername: target.servername } : {}),
        },
        {
          onRequestStart: (c) => {
            controller = c;
            // The deadline passed while the connection was being made.
            if (settled) abort();
          },
          onResponseStart: (_c, statusCode) => {
            // 1xx informational answers are not the status of the delivery.
            if (statusCode >= 200) status = statusCode;
          },
          onResponseData: (_c, chunk) => {
            received += chunk.length;
            if (excerptLength < excerptBytes) {
              const part = chunk.subarray(0, excerptBytes - excerptLength);
              (excerpt ??= []).push(part);
              excerptLength += part.length;
            }
            if (received > maxResponseBytes) {
              finishResponse();
              abort();
            }
          },
          onResponseEnd: finishResponse,
          onResponseError: (_c, error) => {
            if (settled) return;
            const code = errorCode(error);
            const durationMs = performance.now() - started;
            if (status !== 0) finishResponse();
            else if (error instanceof BlockedAddressError)
              finish({ kind: 'refused', code: 'blocked_address', detail: error.message });
            else if (error instanceof HostResolutionError || DNS_CODES.has(code))
              finish({ kind: 'network_error', code: 'dns_error', detail: code, durationMs });
            else if (isTlsCode(code))
              finish({ kind: 'network_error', code: 'tls_error', detail: code, durationMs });
            else finish({ kind: 'network_error', code: 'network_error', detail: code, durationMs });
          },
        },
      );
    });
  }
}
