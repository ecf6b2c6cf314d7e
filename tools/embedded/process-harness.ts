import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';

export const repoRoot = join(__dirname, '..', '..');

export interface SpawnedProcess {
  readonly child: ChildProcess;
  readonly output: string[];
  /** Resolves with the first stdout line matching, or rejects on exit/timeout. */
  waitForLine(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** Sends the signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts a Node process the way a person or an orchestrator would, keeping its output for assertions. */
export function spawnNode(args: string[], env: Record<string, string | undefined>): SpawnedProcess {
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: env as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const listeners = new Set<(line: string) => void>();
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on('line', (line) => {
      output.push(line);
      for (const l of listeners) l(line);
    });
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    output,
    waitForLine: (match, timeoutMs = 60_000) =>
      new Promise<string>((resolve, reject) => {
        const existing = output.find(match);
        if (existing) return resolve(existing);
        const timer = setTimeout(
          () => reject(new Error(`timed out; output:\n${output.join('\n')}`)),
          timeoutMs,
        );
        const listener = (line: string) => {
          if (match(line)) {
            clearTimeout(timer);
            listeners.delete(listener);
            resolve(line);
          }
        };
        listeners.add(listener);
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`process exited with ${code}; output:\n${output.join('\n')}`));
        });
      }),
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

export function cleanEnv(extra: Record<string, string | undefined>): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {
    PATH: process.env['PATH'],
    HOME: process.env['HOME'],
    NODE_ENV: 'test',
  };
  return { ...env, ...extra };
}
