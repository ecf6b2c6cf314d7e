import { isObservable, lastValueFrom } from 'rxjs';
import {
  BaseRpcContext,
  ClientProxy,
  type CustomTransportStrategy,
  type ReadPacket,
  Server,
  type WritePacket,
} from '@nestjs/microservices';

/**
 * The meeting point of the in-process transport: one per application, shared by its command server and its
 * clients (never a global, so two applications in one process, as in tests, stay apart).
 */
export class InProcessBroker {
  server: InProcessServer | undefined;
}

/**
 * What crosses the in-process transport is what would cross a wire: JSON. A handler never sees the caller's
 * objects and a caller never gets the handler's, so embedded mode fails where the distributed one would.
 */
function overTheWire<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/** Nest 11 custom transport: the server side (listen, close, on and unwrap are all required). */
export class InProcessServer extends Server implements CustomTransportStrategy {
  constructor(private readonly broker: InProcessBroker) {
    super();
  }

  listen(callback: (...optionalParams: unknown[]) => unknown): void {
    this.broker.server = this;
    callback();
  }

  close(): void {
    if (this.broker.server === this) this.broker.server = undefined;
  }

  on(): never {
    throw new Error('the in-process command transport has no transport events');
  }

  unwrap<T>(): T {
    return this.broker as T;
  }

  /** Handlers by pattern: Nest's lookup normalises and tries to parse the pattern as JSON on every call. */
  private readonly handlers = new Map<string, NonNullable<ReturnType<Server['getHandlerByPattern']>>>();

  /**
   * The CommandClient's path: runs the handler of `pattern` (with its RPC pipeline: pipes, interceptors, the
   * error filter) and settles with its JSON answer, or rejects with the JSON of what the error filter made of the
   * failure, exactly what `dispatch` would deliver, without the packet streams in between.
   */
  async call(pattern: string, data: unknown): Promise<unknown> {
    let handler = this.handlers.get(pattern);
    if (!handler) {
      handler = this.getHandlerByPattern(this.normalizePattern(pattern)) ?? undefined;
      if (!handler) throw { message: `no handler for command ${pattern}` };
      this.handlers.set(pattern, handler);
    }
    let result: unknown;
    try {
      const answer: unknown = await handler(overTheWire(data), new BaseRpcContext([pattern]));
      result = isObservable(answer) ? await lastValueFrom(answer, { defaultValue: undefined }) : answer;
    } catch (error) {
      throw overTheWire(error);
    }
    return overTheWire(result);
  }

  /** Runs the handler of the packet's pattern and answers through `respond` (response, then disposal). */
  dispatch(packet: ReadPacket, respond: (packet: WritePacket) => void): void {
    const pattern = this.normalizePattern(packet.pattern);
    const handler = this.getHandlerByPattern(pattern);
    if (!handler) {
      respond({ err: { message: `no handler for command ${pattern}` }, isDisposed: true });
      return;
    }
    const answer = (p: WritePacket) => respond(overTheWire(p));
    Promise.resolve()
      .then(() => handler(overTheWire(packet.data), new BaseRpcContext([pattern])))
      .then(
        (result) => this.send(this.transformToObservable(result), answer),
        (error: unknown) => answer({ err: error, isDisposed: true }),
      );
  }
}

/** The client side: hands packets to the application's in-process server. */
export class InProcessClient extends ClientProxy {
  constructor(private readonly broker: InProcessBroker) {
    super();
  }

  async connect(): Promise<void> {
    // nothing to connect: the server is found at send time
  }

  close(): void {
    // nothing to release
  }

  unwrap<T>(): T {
    return this.broker as T;
  }

  protected publish(packet: ReadPacket, callback: (packet: WritePacket) => void): () => void {
    const server = this.broker.server;
    if (!server) {
      callback({ err: { message: 'no in-process command server is listening' }, isDisposed: true });
    } else {
      server.dispatch(packet, callback);
    }
    return () => undefined;
  }

  protected dispatchEvent(): Promise<never> {
    return Promise.reject(new Error('the in-process command transport carries commands, not events'));
  }
}
