import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Payload } from '@nestjs/microservices';
import { createServer } from 'node:net';
import { conflict, DomainError, validationError } from '@stablepay/util';
import { CommandClient, CommandsModule } from './command-client';
import { CommandHandler } from './command-handler';
import { connectCommandServer } from './command-server';
import { type CommandsConfig, commandsConfigFromEnv } from './commands.config';
import { InProcessBroker } from './in-process.transport';
import { defineCommands } from './patterns';

const PATTERNS = defineCommands('subscriptions', {
  echo: 'subscriptions.test.echo',
  refuse: 'subscriptions.test.refuse',
  crash: 'subscriptions.test.crash',
  nothing: 'subscriptions.test.nothing',
  slow: 'subscriptions.test.slow',
});

const REFUSALS = {
  validation: () => validationError('price', 'price must be a positive integer string.', 'invalid_price'),
  conflict: () => conflict('subscription_checkout_not_pending', 'The subscription checkout is not pending.'),
};

@Controller()
class TestHandlers {
  @CommandHandler(PATTERNS.echo)
  echo(@Payload() payload: { when: string; amount: string; list: number[] }) {
    return { received: payload, whenIsString: typeof payload.when === 'string' };
  }

  @CommandHandler(PATTERNS.refuse)
  refuse(@Payload() payload: { kind: keyof typeof REFUSALS }): never {
    throw REFUSALS[payload.kind]();
  }

  @CommandHandler(PATTERNS.crash)
  crash(): never {
    throw new Error('database exploded: secret connection string');
  }

  @CommandHandler(PATTERNS.nothing)
  nothing() {
    return null;
  }

  /** Answers once the test opens `slowGate` (after COMMAND_TIMEOUT_MS has passed). */
  @CommandHandler(PATTERNS.slow)
  async slow() {
    await slowGate.promise;
    return { answered: true };
  }
}

function gate(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
let slowGate = gate();

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

const kafkaBrokers = process.env['KAFKA_BROKERS'];
if (!kafkaBrokers) console.log('Kafka request-reply commands not tested: KAFKA_BROKERS is not set');

/** One application that owns the commands, and one that only sends them (like the gateway). */
async function start(config: CommandsConfig, withHandlers: boolean): Promise<NestFastifyApplication> {
  const broker = new InProcessBroker();
  @Module({
    imports: [CommandsModule.forRoot(config, broker)],
    controllers: withHandlers ? [TestHandlers] : [],
  })
  class Root {}
  const app = await NestFactory.create<NestFastifyApplication>(Root, new FastifyAdapter(), { logger: false });
  if (withHandlers) {
    connectCommandServer(app, config, broker, 'subscriptions');
    await app.startAllMicroservices();
  }
  await app.init();
  return app;
}

/** The owner and its caller: in-process the owner's own application, over a network another application. */
async function startPair(
  transport: 'in-process' | 'tcp' | 'kafka',
  timeoutMs: number,
): Promise<{ owner: NestFastifyApplication; caller: NestFastifyApplication }> {
  const port = await freePort();
  const config = commandsConfigFromEnv(
    {
      COMMAND_TRANSPORT: transport,
      COMMANDS_HOST: '127.0.0.1',
      COMMANDS_PORT: String(port),
      SUBSCRIPTIONS_COMMANDS_ADDRESS: `127.0.0.1:${port}`,
      COMMAND_TIMEOUT_MS: String(timeoutMs),
      ...(kafkaBrokers ? { KAFKA_BROKERS: kafkaBrokers } : {}),
    },
    {},
  );
  const owner = await start(config, true);
  return { owner, caller: transport === 'in-process' ? owner : await start(config, false) };
}

const TRANSPORTS = ['in-process', 'tcp', ...(kafkaBrokers ? (['kafka'] as const) : [])] as const;

describe.each(TRANSPORTS)('commands over the %s transport', (transport) => {
  let owner: NestFastifyApplication;
  let caller: NestFastifyApplication;
  let client: CommandClient;

  beforeAll(async () => {
    ({ owner, caller } = await startPair(transport, transport === 'kafka' ? 60_000 : 5_000));
    client = caller.get(CommandClient);
  });

  afterAll(async () => {
    if (caller !== owner) await caller?.close();
    await owner?.close();
  });

  it('carries the payload and the answer as JSON', async () => {
    const answer = await client.send<{ received: unknown; whenIsString: boolean }>(
      'subscriptions',
      PATTERNS.echo,
      {
        when: '2026-01-01T00:00:00.000Z',
        amount: '12345678901234567890',
        list: [1, 2, 3],
      },
    );
    expect(answer).toEqual({
      received: { when: '2026-01-01T00:00:00.000Z', amount: '12345678901234567890', list: [1, 2, 3] },
      whenIsString: true,
    });
  });

  it('answers null when the handler has nothing to say', async () => {
    expect(await client.send('subscriptions', PATTERNS.nothing, {})).toBeNull();
  });

  it.each(['validation', 'conflict'] as const)(
    'delivers a %s DomainError unchanged (type, status, code, param, message)',
    async (kind) => {
      const error = await client.send('subscriptions', PATTERNS.refuse, { kind }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DomainError);
      expect((error as DomainError).toJSON()).toEqual(REFUSALS[kind]().toJSON());
    },
  );

  it('turns any other failure into an opaque error that reveals nothing of the owner', async () => {
    const error = await client.send('subscriptions', PATTERNS.crash, {}).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(DomainError);
    expect(String(error)).toMatch(/owning service failed/);
    expect(String(error)).not.toMatch(/secret/);
  });
});

describe.each(['in-process', 'tcp'] as const)(
  'a command sent with minTimeoutMs over the %s transport',
  (transport) => {
    let owner: NestFastifyApplication;
    let caller: NestFastifyApplication;

    beforeAll(async () => {
      ({ owner, caller } = await startPair(transport, 200));
    });

    afterAll(async () => {
      slowGate.resolve();
      if (caller !== owner) await caller?.close();
      await owner?.close();
    });

    it('is waited for past COMMAND_TIMEOUT_MS, up to minTimeoutMs; without it the caller gets 503', async () => {
      slowGate = gate();
      const client = caller.get(CommandClient);
      const patient = client.send('subscriptions', PATTERNS.slow, {}, { minTimeoutMs: 10_000 });
      const hasty = client.send('subscriptions', PATTERNS.slow, {}).catch((e: unknown) => e);
      expect(await hasty).toMatchObject({ status: 503, code: 'service_unavailable' });
      slowGate.resolve();
      expect(await patient).toEqual({ answered: true });
    });
  },
);

describe('an owner that does not answer', () => {
  it('is a 503 service_unavailable DomainError', async () => {
    const port = await freePort(); // nobody listens there
    const config = commandsConfigFromEnv({
      COMMAND_TRANSPORT: 'tcp',
      SUBSCRIPTIONS_COMMANDS_ADDRESS: `127.0.0.1:${port}`,
      COMMAND_TIMEOUT_MS: '2000',
    });
    const caller = await start(config, false);
    try {
      const error = await caller
        .get(CommandClient)
        .send('subscriptions', PATTERNS.echo, {})
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DomainError);
      expect((error as DomainError).toJSON()).toMatchObject({
        type: 'api_error',
        status: 503,
        code: 'service_unavailable',
      });
    } finally {
      await caller.close();
    }
  });
});

describe('commandsConfigFromEnv', () => {
  it('defaults to TCP with owners at their service names, and names a malformed variable', () => {
    const config = commandsConfigFromEnv({});
    expect(config.transport).toBe('tcp');
    expect(config.owners.subscriptions).toEqual({ host: 'subscriptions', port: 4000 });
    expect(config.owners['webhook-dispatch']).toEqual({ host: 'webhook-dispatch', port: 4000 });
    expect(() => commandsConfigFromEnv({ SUBSCRIPTIONS_COMMANDS_ADDRESS: 'nope' })).toThrow(
      /SUBSCRIPTIONS_COMMANDS_ADDRESS must be host:port/,
    );
    expect(() => commandsConfigFromEnv({ COMMAND_TRANSPORT: 'pigeon' })).toThrow(/COMMAND_TRANSPORT/);
    expect(() => commandsConfigFromEnv({ COMMAND_TRANSPORT: 'kafka' })).toThrow(/KAFKA_BROKERS/);
  });
});
