import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';

export interface PgliteServer {
  readonly url: string;
  readonly port: number;
  /** The child's pid: a run that locks its data directory lists it, so a takeover waits until it has closed. */
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

/** Repository root, found from this file (libs/shared/util/src). */
export const workspaceRoot = join(__dirname, '..', '..', '..', '..');

/**
 * Starts PGlite behind the Postgres wire protocol in a child process (PGlite is ESM + WASM and does not
 * load inside Jest's module system; a child process also means it is torn down even if a test crashes,
 * because it exits when its stdin pipe closes).
 */
export async function startPgliteServer(
  options: { dataDir?: string; port?: number } = {},
): Promise<PgliteServer> {
  const script = join(workspaceRoot, 'tools', 'pglite', 'serve.mjs');
  const args = [
    script,
    '--port',
    String(options.port ?? 0),
    '--data-dir',
    options.dataDir ?? 'memory://',
    '--managed',
  ];
  const child: ChildProcess = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  if (!child.stdout) throw new Error('PGlite server has no stdout pipe');
  const lines = createInterface({ input: child.stdout });
  const ready = await new Promise<{ url: string; port: number }>((resolve, reject) => {
    // Loading the WASM build can take most of a minute on a busy machine: the ceiling is generous. A server that
    // did not start is killed, or its open pipe would keep the caller's process (a Jest worker) alive for good.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('PGlite server did not start within 180 s'));
    }, 180_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`PGlite server exited early with code ${code}`));
    });
    lines.once('line', (line) => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(line) as { url: string; port: number });
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
  });
  child.removeAllListeners('exit');
  return {
    url: ready.url,
    port: ready.port,
    pid: child.pid,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        // It ignores signals (a process-group signal must not stop it before us): closing its stdin stops it.
        const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.stdin?.end();
      }),
  };
}
