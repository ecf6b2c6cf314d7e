import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { until, type Json } from './http';

export interface SignedWebhook {
  readonly id: string;
  readonly type: string;
  readonly data: Record<string, Json>;
}

interface Delivery {
  readonly body: string;
  readonly headers: IncomingHttpHeaders;
  readonly event: SignedWebhook;
}

/**
 * A merchant's webhook endpoint on 127.0.0.1 for end-to-end tests: answers 200, keeps every delivery, and hands a
 * test only deliveries whose signature verifies with the merchant's secret (set once the settings answered it).
 */
export class SignedWebhookReceiver {
  secret = '';
  /** The verifier's clock: the stack's own when a test moves it (webhooks are stamped by the service clock). */
  constructor(private readonly now: () => Date = () => new Date()) {}

  private readonly deliveries: Delivery[] = [];
  private server: Server | undefined;

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        this.deliveries.push({ body, headers: req.headers, event: JSON.parse(body) as SignedWebhook });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.server = server;
    return this;
  }

  get url(): string {
    const address = this.server?.address();
    if (!address || typeof address === 'string') throw new Error('receiver not started');
    return `http://127.0.0.1:${address.port}/hooks`;
  }

  /** Every delivery so far, in arrival order, each signature verified, with its request headers. */
  delivered(): Array<SignedWebhook & { readonly headers: IncomingHttpHeaders }> {
    return this.deliveries.map((d) => ({ ...this.verified(d), headers: d.headers }));
  }

  /** Every delivered event of `type` whose `data.<key>.id` is `id`, in arrival order, each signature verified. */
  all(type: string, id: string, key = 'object'): SignedWebhook[] {
    return this.where(type, (data) => data[key]?.['id'] === id);
  }

  /** Every delivered event of `type` whose `data` matches, in arrival order, each signature verified. */
  where(type: string, matches: (data: SignedWebhook['data']) => boolean): SignedWebhook[] {
    return this.deliveries
      .filter((d) => d.event.type === type && matches(d.event.data))
      .map((d) => this.verified(d));
  }

  private verified(d: Delivery): SignedWebhook {
    const verdict = verifyWebhook(d.body, d.headers, this.secret, { now: this.now() });
    if (!verdict.valid) throw new Error(`webhook ${d.event.id} does not verify: ${JSON.stringify(verdict)}`);
    return d.event;
  }

  /** Waits for the `count`-th delivery of `type` about `id` (signature verified) and answers it. */
  async next(
    type: string,
    id: string,
    options: { key?: string; count?: number } = {},
  ): Promise<SignedWebhook> {
    const count = options.count ?? 1;
    const hits = await until(
      async () => this.all(type, id, options.key),
      (h) => h.length >= count,
      `webhook ${type} of ${id} (#${count})`,
    );
    const hit = hits[count - 1];
    if (!hit) throw new Error('unreachable');
    return hit;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
