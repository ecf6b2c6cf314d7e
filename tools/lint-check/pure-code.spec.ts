import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * The lint is the guard of the dependency rules: these tests feed it source text under real file paths (the
 * text replaces the file's content for the check; nothing is written) and prove that it refuses what the
 * architecture forbids in pure code, and only there.
 */
const domainFile = 'libs/merchants/domain/src/rules.ts';
const utilFile = 'libs/shared/util/src/money.ts';
const serviceFile = 'libs/merchants/service/src/settings.reader.ts';
const importing = (specifier: string) =>
  `import * as dependency from '${specifier}';\nexport { dependency };\n`;

const refusedInDomain = [
  '@nestjs/common',
  'typeorm',
  'pg',
  'kafkajs',
  '@eventstore/db-client',
  '@electric-sql/pglite',
  'fastify',
  'node:http',
  'node:net',
  'node:fs',
  'dns',
  '@stablepay/node-util',
];
const cases = [
  ...refusedInDomain.map((s) => ({ filePath: domainFile, text: importing(s) })),
  { filePath: utilFile, text: importing('@nestjs/core') },
  { filePath: utilFile, text: importing('node:child_process') },
  { filePath: domainFile, text: importing('node:crypto') },
  { filePath: domainFile, text: importing('@stablepay/util') },
  { filePath: serviceFile, text: importing('@nestjs/common') },
  { filePath: serviceFile, text: importing('typeorm') },
];

let banned: string[][];

beforeAll(() => {
  const out = execFileSync(process.execPath, [join(__dirname, 'lint-texts.mjs')], {
    input: JSON.stringify(cases),
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  const results = JSON.parse(out.trim().split('\n').pop() ?? '[]') as {
    ruleId: string | null;
    message: string;
  }[][];
  banned = results.map((messages) =>
    messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message),
  );
}, 180_000);

const bannedFor = (filePath: string, specifier: string) =>
  banned[cases.findIndex((c) => c.filePath === filePath && c.text === importing(specifier))];

describe('the lint keeps pure code free of frameworks, databases and the network', () => {
  it.each(refusedInDomain)('refuses %s in a domain lib', (specifier) => {
    const messages = bannedFor(domainFile, specifier);
    expect(messages).toHaveLength(1);
    expect(messages?.[0]).toMatch(/pure code .* must not import frameworks, databases or the network/);
  });

  it('refuses them in the pure util lib too', () => {
    expect(bannedFor(utilFile, '@nestjs/core')).toHaveLength(1);
    expect(bannedFor(utilFile, 'node:child_process')).toHaveLength(1);
  });

  it('allows hashing and the pure util lib in a domain lib', () => {
    expect(bannedFor(domainFile, 'node:crypto')).toEqual([]);
    expect(bannedFor(domainFile, '@stablepay/util')).toEqual([]);
  });

  it('allows frameworks and databases in a service lib', () => {
    expect(bannedFor(serviceFile, '@nestjs/common')).toEqual([]);
    expect(bannedFor(serviceFile, 'typeorm')).toEqual([]);
  });
});
