import { freeLoopbackPort } from '@stablepay/node-util';

/** A port free on 127.0.0.1 right now, outside the range outgoing connections use (tests bind loopback only). */
export function freePort(): Promise<number> {
  return freeLoopbackPort();
}
