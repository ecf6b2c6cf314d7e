import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Where a picked port is drawn from when the OS's ephemeral range starts above it (Linux: 32768). */
const PICK_FROM = 20_000;
const ATTEMPTS = 64;

/**
 * A port free on 127.0.0.1 right now, for a child process (anvil, a service) to bind a moment later.
 *
 * The port is drawn below the OS's ephemeral range on purpose: `listen(0)` hands out a port from that range, the
 * same range every outgoing connection (to PostgreSQL, anvil, a webhook receiver) takes its local port from, and
 * between the pick and the child's bind (seconds on a loaded machine) such a connection took it often enough to
 * fail runs with EADDRINUSE. Below the range only another explicit bind can take it. Falls back to `listen(0)`
 * where the range is unknown or starts too low to leave room.
 */
export async function freeLoopbackPort(): Promise<number> {
  const ephemeralLow = ephemeralRangeStart();
  if (ephemeralLow !== undefined && ephemeralLow - PICK_FROM >= 1_000) {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const candidate = PICK_FROM + Math.floor(Math.random() * (ephemeralLow - PICK_FROM));
      if (await bindable(candidate)) return candidate;
    }
  }
  return osAssignedPort();
}

/** The first port of the OS's ephemeral range, when the OS says (Linux); undefined otherwise. */
export function ephemeralRangeStart(): number | undefined {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    const port = Number(low);
    return Number.isInteger(port) && port > 0 ? port : undefined;
  } catch {
    return undefined;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function osAssignedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('no port assigned'));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}
