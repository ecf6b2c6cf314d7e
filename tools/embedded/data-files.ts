import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { ConfigError } from '@stablepay/util';

/**
 * Creates `path` holding `text` unless it exists (false): written aside, flushed to disk, then linked into place
 * (link never replaces). A kill -9 or a machine that dies never leaves it empty or half written, which a later
 * start would refuse or take for what the run chose.
 */
export function createWhole(path: string, text: string, options: { mode: number; aside?: string }): boolean {
  const aside = options.aside ?? `${path}.${process.pid}.new`;
  const fd = openSync(aside, 'w', options.mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(aside, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    unlinkQuietly(aside);
  }
}

/** Removes `file`; one already gone is fine. */
export function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/**
 * What a data file holds, trimmed; undefined when it is absent or blank. A blank one is what a start killed between
 * creating and writing it left (before files were created whole): nothing was chosen, so it is made again.
 */
export function readDataFile(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  if (text !== '') return text;
  unlinkSync(path);
  return undefined;
}

/**
 * The key sealing webhook secrets at rest, kept with the embedded data (owner-only file): a restart on the same
 * data must open what the previous run sealed. Made once, on the first start.
 */
export function sealingKey(file: string): string {
  if (readDataFile(file) === undefined)
    createWhole(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600 });
  chmodSync(file, 0o600);
  const key = readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/i.test(key))
    throw new ConfigError(`the embedded sealing key in ${file} is not 32 bytes as 64 hex characters`);
  return key;
}
