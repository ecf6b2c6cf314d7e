import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP server on 127.0.0.1 (free port) that can stop answering: while held, requests wait unanswered until
 * `release`, as a node that hangs (SIGSTOP, a dead load balancer) keeps its clients waiting. `answer` gives the
 * response to a request's body (a JSON-RPC node faked, or a proxy forwarding to a real one).
 */
export interface HoldingServer {
  readonly url: string;
  /** Requests waiting unanswered right now. */
  held(): number;
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

export async function startHoldingServer(
  answer: (body: Buffer) => Promise<{ readonly status: number; readonly body: string }>,
): Promise<HoldingServer> {
  let holding = false;
  let waiting: Array<() => void> = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      if (holding) await new Promise<void>((resolve) => waiting.push(resolve));
      const response = await answer(Buffer.concat(chunks));
      res.writeHead(response.status, { 'content-type': 'application/json' });
      res.end(response.body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    held: () => waiting.length,
    hold: () => {
      holding = true;
    },
    release: () => {
      holding = false;
      const released = waiting;
      waiting = [];
      for (const resume of released) resume();
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
