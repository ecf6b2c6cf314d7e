import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** How the receiver answers a path. */
export type ReceiverBehaviour =
  | { readonly kind: 'status'; readonly status: number; readonly body?: string }
  /** Never answers (until the test ends). */
  | { readonly kind: 'hang' }
  /** Answers `status` once the test calls `release()`: holds an attempt in flight for as long as the test needs. */
  | { readonly kind: 'held'; readonly status: number }
  /** Answers the status line at once, then trickles the body for `ms`. */
  | { readonly kind: 'slow-body'; readonly status: number; readonly ms: number }
  /** Destroys the connection as soon as the request arrived. */
  | { readonly kind: 'close' }
  | { readonly kind: 'redirect'; readonly status: number; readonly location: string }
  /** A large body (to prove the read limit). */
  | { readonly kind: 'big'; readonly bytes: number };

export interface ReceivedDelivery {
  readonly path: string;
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawBody: Buffer;
  readonly receivedAt: number;
  /** The client's port: deliveries with the same one came over one kept-alive connection. */
  readonly remotePort: number | undefined;
}

/**
 * A real HTTP receiver on 127.0.0.1 for tests: records every request with its raw body bytes and answers per path
 * (`script(path)` -> behaviour; a list of behaviours is used in turn, the last one repeating). Sockets it holds are
 * destroyed on stop, so a hanging answer never keeps the test process alive.
 */
export class TestReceiver {
  readonly received: ReceivedDelivery[] = [];
  private readonly scripts = new Map<string, ReceiverBehaviour[]>();
  private readonly sockets = new Set<Socket>();
  private readonly waiters: Array<{ count: number; path?: string; resolve: () => void }> = [];
  private server: Server | undefined;
  private port = 0;
  private held: ServerResponse[] = [];

  constructor(private readonly fallback: ReceiverBehaviour = { kind: 'status', status: 204 }) {}

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        this.received.push({
          path,
          method: req.method ?? '',
          headers: req.headers,
          rawBody: Buffer.concat(chunks),
          receivedAt: Date.now(),
          remotePort: req.socket.remotePort,
        });
        this.notify();
        this.answer(path, res, req.socket);
      });
    });
    server.keepAliveTimeout = 5_000;
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    this.server = server;
    return this;
  }

  url(path = '/hooks'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Behaviours for one path, used in turn; the last repeats. */
  script(path: string, ...behaviours: ReceiverBehaviour[]): void {
    this.scripts.set(path, behaviours);
  }

  on(path: string): ReceivedDelivery[] {
    return this.received.filter((r) => r.path === path);
  }

  /** Resolves once `count` requests (to `path`, if given) have arrived. */
  waitFor(count: number, path?: string, timeoutMs = 10_000): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`receiver got ${this.countOf(path)} of ${count} requests${path ? ` on ${path}` : ''}`),
          ),
        timeoutMs,
      );
      this.waiters.push({
        count,
        ...(path !== undefined ? { path } : {}),
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
      this.notify();
    });
  }

  /** Answers every request held by a `held` behaviour so far. */
  release(): void {
    const held = this.held;
    this.held = [];
    for (const res of held) res.end();
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private countOf(path?: string): number {
    return path === undefined ? this.received.length : this.on(path).length;
  }

  private notify(): void {
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i];
      if (w && this.countOf(w.path) >= w.count) {
        this.waiters.splice(i, 1);
        w.resolve();
      }
    }
  }

  private next(path: string): ReceiverBehaviour {
    const script = this.scripts.get(path);
    if (!script || script.length === 0) return this.fallback;
    const [head, ...rest] = script;
    if (rest.length > 0) this.scripts.set(path, rest);
    return head ?? this.fallback;
  }

  private answer(path: string, res: ServerResponse, socket: Socket): void {
    const behaviour = this.next(path);
    switch (behaviour.kind) {
      case 'status':
        res.writeHead(behaviour.status, { 'content-type': 'text/plain' });
        res.end(behaviour.body ?? '');
        return;
      case 'hang':
        return;
      case 'held':
        res.writeHead(behaviour.status, { 'content-type': 'text/plain' });
        this.held.push(res);
        return;
      case 'slow-body': {
        res.writeHead(behaviour.status, { 'content-type': 'text/plain' });
        res.write('partial');
        setTimeout(() => res.end('done'), behaviour.ms).unref();
        return;
      }
      case 'close':
        socket.destroy();
        return;
      case 'redirect':
        res.writeHead(behaviour.status, { location: behaviour.location });
        res.end();
        return;
      case 'big':
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(Buffer.alloc(behaviour.bytes, 'x'));
        return;
    }
  }
}
