import { createSocket, type Socket } from 'node:dgram';
import { isIPv6 } from 'node:net';

/** What the server does with queries for one name. */
export type FakeDnsRecord =
  | {
      readonly kind: 'answer';
      readonly a?: readonly string[];
      readonly aaaa?: readonly string[];
      /** Queries of this type are held as by a `hold` record: a server that drops only, say, AAAA queries. */
      readonly hold?: 'a' | 'aaaa';
    }
  /** Reads the query and never answers: a name server that black-holes queries. */
  | { readonly kind: 'blackhole' }
  /**
   * Reads the query and keeps it unanswered until `release(name)`, which answers it as the name's record then
   * says: a name server that is slow for exactly as long as the test wants, with no deadline raced.
   */
  | { readonly kind: 'hold' };

export interface FakeDnsQuery {
  readonly name: string;
  /** 1 = A, 28 = AAAA. */
  readonly type: number;
}

const TYPE_A = 1;
const TYPE_AAAA = 28;

function ipv6Bytes(address: string): Buffer {
  const [head = '', tail] = address.split('::');
  const part = (s: string) => (s === '' ? [] : s.split(':'));
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

function ipv4Bytes(address: string): Buffer {
  return Buffer.from(address.split('.').map(Number));
}

/**
 * A UDP DNS server on 127.0.0.1 and a port the system picks, answering A and AAAA queries from a table: names
 * not in it are NXDOMAIN, a name without records of the asked type is NODATA, a black-holed name is never
 * answered. Point a resolver at `server` to test what slow or missing answers do.
 */
export class FakeDnsServer {
  private socket: Socket | undefined;
  private readonly records = new Map<string, FakeDnsRecord>();
  private readonly waiters: Array<{ name: string; resolve: () => void }> = [];
  private readonly held: Array<{
    name: string;
    type: number;
    message: Buffer;
    port: number;
    address: string;
  }> = [];
  /** Every query received, in order. */
  readonly queries: FakeDnsQuery[] = [];

  set(name: string, record: FakeDnsRecord): this {
    this.records.set(name.toLowerCase(), record);
    return this;
  }

  async start(): Promise<void> {
    const socket = createSocket('udp4');
    socket.on('message', (message, remote) => {
      const question = this.received(message);
      if (question === null) return;
      const { name, type } = question;
      if (holds(this.records.get(name), type)) {
        this.held.push({ name, type, message, port: remote.port, address: remote.address });
        return;
      }
      const reply = this.reply(message);
      if (reply) socket.send(reply, remote.port, remote.address);
    });
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    this.socket = socket;
  }

  /** `127.0.0.1:port`, for `Resolver.setServers`. */
  get server(): string {
    if (!this.socket) throw new Error('FakeDnsServer is not started');
    return `127.0.0.1:${this.socket.address().port}`;
  }

  /** Resolves once a query for the name has arrived (at once if one already has). */
  queried(name: string): Promise<void> {
    const lower = name.toLowerCase();
    if (this.queries.some((q) => q.name === lower)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ name: lower, resolve }));
  }

  /** The queries for the name being held unanswered (by a `hold` record or an answer's `hold`). */
  heldQueries(name: string): FakeDnsQuery[] {
    const lower = name.toLowerCase();
    return this.held.filter((q) => q.name === lower).map((q) => ({ name: q.name, type: q.type }));
  }

  /**
   * Answers the queries held for the name as its record now says: set the record first, a query it still holds
   * stays held. Later queries are answered at once by that record too.
   */
  release(name: string): void {
    const lower = name.toLowerCase();
    const record = this.records.get(lower);
    const socket = this.socket;
    for (let i = 0; i < this.held.length;) {
      const query = this.held[i];
      if (query?.name !== lower || holds(record, query.type)) {
        i++;
        continue;
      }
      this.held.splice(i, 1);
      const reply = this.reply(query.message);
      if (reply && socket) socket.send(reply, query.port, query.address);
    }
  }

  async stop(): Promise<void> {
    const socket = this.socket;
    this.socket = undefined;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }

  /** Records the query and wakes its waiters; its question, or null for a message that is no query. */
  private received(message: Buffer): FakeDnsQuery | null {
    const question = parseQuestion(message);
    if (!question) return null;
    this.queries.push({ name: question.name, type: question.type });
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const waiter = this.waiters[i];
      if (waiter?.name === question.name) {
        this.waiters.splice(i, 1);
        waiter.resolve();
      }
    }
    return question;
  }

  private reply(message: Buffer): Buffer | null {
    const question = parseQuestion(message);
    if (!question) return null;
    const { name, type, questionEnd } = question;
    const record = this.records.get(name);
    if (record?.kind === 'blackhole' || record?.kind === 'hold' || holds(record, type)) return null;
    const addresses =
      record === undefined
        ? []
        : ((type === TYPE_A ? record.a : type === TYPE_AAAA ? record.aaaa : []) ?? []);
    const answers = addresses.map((address) => {
      const data = isIPv6(address) ? ipv6Bytes(address) : ipv4Bytes(address);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // a pointer to the question's name
      rr.writeUInt16BE(type, 2);
      rr.writeUInt16BE(1, 4); // class IN
      rr.writeUInt32BE(60, 6);
      rr.writeUInt16BE(data.length, 10);
      return Buffer.concat([rr, data]);
    });
    const header = Buffer.alloc(12);
    message.copy(header, 0, 0, 2); // the query's id
    const recursionDesired = (message[2] ?? 0) & 0x01;
    header[2] = 0x80 | recursionDesired; // QR=1, opcode 0
    header[3] = 0x80 | (record === undefined ? 3 : 0); // RA=1; NXDOMAIN for unknown names
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    return Buffer.concat([header, message.subarray(12, questionEnd), ...answers]);
  }
}

function parseQuestion(message: Buffer): { name: string; type: number; questionEnd: number } | null {
  if (message.length < 12) return null;
  const labels: string[] = [];
  let offset = 12;
  for (;;) {
    const length = message[offset];
    if (length === undefined || length > 63) return null;
    offset += 1;
    if (length === 0) break;
    labels.push(message.subarray(offset, offset + length).toString('latin1'));
    offset += length;
  }
  if (offset + 4 > message.length) return null;
  return {
    name: labels.join('.').toLowerCase(),
    type: message.readUInt16BE(offset),
    questionEnd: offset + 4,
  };
}

function holds(record: FakeDnsRecord | undefined, type: number): boolean {
  if (record?.kind === 'hold') return true;
  if (record?.kind !== 'answer' || record.hold === undefined) return false;
  return type === (record.hold === 'a' ? TYPE_A : TYPE_AAAA);
}
