/**
 * Structured JSON logs, one object per line, compatible with Nest's LoggerService so the framework's
 * own messages come out in the same shape. Secrets never reach here: callers log ids and fingerprints.
 */
export type LogLevel = 'error' | 'warn' | 'log' | 'debug' | 'verbose' | 'fatal';

const LEVEL_ORDER: Record<LogLevel, number> = { fatal: 0, error: 1, warn: 2, log: 3, debug: 4, verbose: 5 };

export interface LogSink {
  write(line: string): void;
}

export class JsonLogger {
  private readonly threshold: number;

  constructor(
    private readonly service: string,
    level: LogLevel = 'log',
    private readonly sink: LogSink = process.stdout,
  ) {
    this.threshold = LEVEL_ORDER[level];
  }

  private emit(level: LogLevel, message: unknown, rest: unknown[]): void {
    if (LEVEL_ORDER[level] > this.threshold) return;
    const context = typeof rest[rest.length - 1] === 'string' ? (rest.pop() as string) : undefined;
    const record: Record<string, unknown> = {
      time: new Date().toISOString(),
      level,
      service: this.service,
      ...(context ? { context } : {}),
    };
    if (message instanceof Error) {
      record['msg'] = message.message;
      record['stack'] = message.stack;
    } else if (typeof message === 'object' && message !== null) {
      Object.assign(record, message);
    } else {
      record['msg'] = String(message);
    }
    const extra = rest.filter((r) => r !== undefined);
    if (extra.length > 0)
      record['detail'] = extra.map((e) => (e instanceof Error ? (e.stack ?? e.message) : e));
    this.sink.write(
      JSON.stringify(record, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) + '\n',
    );
  }

  log(message: unknown, ...rest: unknown[]): void {
    this.emit('log', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.emit('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.emit('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]): void {
    this.emit('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.emit('verbose', message, rest);
  }
  fatal(message: unknown, ...rest: unknown[]): void {
    this.emit('fatal', message, rest);
  }
}
