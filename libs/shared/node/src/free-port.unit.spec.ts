import { createServer } from 'node:net';
import { ephemeralRangeStart, freeLoopbackPort } from './free-port';

describe('freeLoopbackPort', () => {
  it('picks a port below the ephemeral range, where outgoing connections never take their local port', async () => {
    const low = ephemeralRangeStart();
    const port = await freeLoopbackPort();
    if (low === undefined) {
      console.log('the OS does not say its ephemeral range here; only bindability is checked');
    } else {
      expect(port).toBeLessThan(low);
    }
    expect(port).toBeGreaterThan(0);
  });

  it('gives a port that can be bound on 127.0.0.1 right after', async () => {
    const port = await freeLoopbackPort();
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
});
