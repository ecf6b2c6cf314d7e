import * as http from 'node:http';
import * as https from 'node:https';
import { performance } from 'node:perf_hooks';
import type { AttemptOutcome } from '@stablepay/webhooks-domain';
import {
  BlockedAddressError,
  checkWebhookTarget,
  type EgressPolicy,
  type ResolveAll,
  systemResolveAll,
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
  /** DNS resolution (tests inject answers to prove the address filter and the pinning). */
  readonly resolveAll?: ResolveAll;
  /** Idle keep-alive sockets are closed after this, below the 5 s most servers use, so a reused one is rarely stale. */
  readonly idleSocketMs?: number;
}

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

/**
 * The one HTTP client of webhook deliveries: POST only, redirects never followed (a 3xx is returned as is and
 * counts as a failure), the SSRF egress policy applied on every attempt with the vetted address pinned through
 * `lookup`, one deadline for connect + TLS + status line, the response read up to a small limit (never logged),
 * and keep-alive connections so a busy endpoint is not re-handshaken for every event.
 */
export class WebhookHttpSender {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;
  private readonly lookup: ReturnType<typeof vettedLookup>;
  /**
   * `checkWebhookTarget` by URL: a pure function of the URL and the policy (no resolution happens in it; names are
   * resolved and vetted by `lookup` on every connection), and parsing it was ~5% of a delivery's CPU.
   */
  private readonly targets = new Map<string, ReturnType<typeof checkWebhookTarget>>();

  constructor(private readonly options: WebhookHttpSenderOptions) {
    const agentOptions = {
      keepAlive: true,
      maxFreeSockets: 256,
      timeout: options.idleSocketMs ?? 4_000,
      scheduling: 'lifo' as const,
    };
    this.httpAgent = new http.Agent(agentOptions);
    this.httpsAgent = new https.Agent(agentOptions);
    this.lookup = vettedLookup(options, options.resolveAll ?? systemResolveAll);
  }

  async send(request: WebhookHttpRequest): Promise<AttemptOutcome> {
    let target = this.targets.get(request.url);
    if (target === undefined) {
      target = checkWebhookTarget(request.url, this.options);
      if (this.targets.size >= 10_000) this.targets.clear();
      this.targets.set(request.url, target);
    }
    if (!target.ok) return { kind: 'refused', code: target.code, detail: target.detail };
    const started = performance.now();
    // No transparent resend, not even on a reused keep-alive socket that fails: the receiver may have read the
    // request before closing, and a resend would be a second delivery on purpose. The schedule retries instead;
    // idle sockets are closed early (`idleSocketMs`) so a stale one is rare.
    return this.once(target, request, started, started + request.timeoutMs);
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private once(
    target: Extract<ReturnType<typeof checkWebhookTarget>, { ok: true }>,
    request: WebhookHttpRequest,
    started: number,
    deadline: number,
  ): Promise<AttemptOutcome> {
    return new Promise<AttemptOutcome>((resolve) => {
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        resolve({ kind: 'timeout', durationMs: performance.now() - started });
        return;
      }
      const { url, literal, hostname } = target;
      const secure = url.protocol === 'https:';
      const options: https.RequestOptions = {
        method: 'POST',
        host: literal ? literal.address : hostname,
        port: url.port ? Number(url.port) : secure ? 443 : 80,
        path: `${url.pathname}${url.search}`,
        headers: { ...request.headers, host: url.host, 'content-length': String(request.body.length) },
        agent: secure ? this.httpsAgent : this.httpAgent,
        ...(literal ? { family: literal.family } : { lookup: this.lookup }),
        ...(secure && !literal ? { servername: hostname } : {}),
      };
      let settled = false;
      let responded = false;
      let response: http.IncomingMessage | undefined;
      const excerpt: Buffer[] = [];
      let excerptLength = 0;
      let received = 0;
      const finish = (outcome: AttemptOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const finishResponse = () => {
        finish({
          kind: 'response',
          status: response?.statusCode ?? 0,
          durationMs: performance.now() - started,
          bodyExcerpt: Buffer.concat(excerpt).toString('utf8'),
        });
      };
      const req = (secure ? https : http).request(options);
      const timer = setTimeout(() => {
        if (responded) {
          // The status came in time (that is what counts); the rest of the body is not waited for.
          response?.destroy();
          finishResponse();
        } else {
          finish({ kind: 'timeout', durationMs: performance.now() - started });
        }
        req.destroy();
      }, remaining);
      req.on('response', (res) => {
        responded = true;
        response = res;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (excerptLength < this.options.excerptBytes) {
            const part = chunk.subarray(0, this.options.excerptBytes - excerptLength);
            excerpt.push(part);
            excerptLength += part.length;
          }
          if (received > this.options.maxResponseBytes) {
            res.destroy();
            finishResponse();
          }
        });
        res.on('end', finishResponse);
        res.on('error', finishResponse);
        res.on('close', finishResponse);
      });
      req.on('error', (error: unknown) => {
        if (settled) return;
        const code = errorCode(error);
        const durationMs = performance.now() - started;
        if (responded) finishResponse();
        else if (error instanceof BlockedAddressError)
          finish({ kind: 'refused', code: 'blocked_address', detail: error.message });
        else if (DNS_CODES.has(code))
          finish({ kind: 'network_error', code: 'dns_error', detail: code, durationMs });
        else if (isTlsCode(code))
          finish({ kind: 'network_error', code: 'tls_error', detail: code, durationMs });
        else finish({ kind: 'network_error', code: 'network_error', detail: code, durationMs });
      });
      req.end(request.body);
    });
  }
}
