// Lint rules for the whole workspace. The module-boundary constraints are the architecture's
// dependency rules (docs/architecture.md): apps never import apps, domain libs import only util libs,
// and every scope sees only itself, the shared scope and the chain scope.
import nx from '@nx/eslint-plugin';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = import.meta.dirname;

/** Source folders of the projects carrying one of `tags` (read from the project.json files under libs). */
function sourceRootsTagged(tags) {
  const found = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir)) {
      if (entry === 'node_modules' || entry.startsWith('.')) continue;
      const path = join(dir, entry);
      if (entry === 'project.json') {
        const project = JSON.parse(readFileSync(path, 'utf8'));
        if ((project.tags ?? []).some((t) => tags.includes(t)))
          found.push(relative(root, join(dir, 'src')).split('\\').join('/'));
      } else if (statSync(path).isDirectory()) walk(path);
    }
  };
  walk(join(root, 'libs'));
  return found.sort();
}

/**
 * Pure code (domain libs and the pure util libs) stays free of frameworks, databases and the network: decide and
 * evolve are functions of their inputs, so they run and test anywhere. Node's crypto (hashing) and the pure
 * parts of libraries (ethers' ABI and hashing helpers) remain allowed.
 */
export const PURE_CODE_BANNED_IMPORTS = {
  paths: [
    'typeorm',
    'pg',
    'kafkajs',
    'fastify',
    'rxjs',
    'class-validator',
    'class-transformer',
    'reflect-metadata',
    ...[
      'http',
      'https',
      'http2',
      'net',
      'tls',
      'dgram',
      'dns',
      'fs',
      'fs/promises',
      'child_process',
      'cluster',
      'worker_threads',
    ].flatMap((m) => [m, `node:${m}`]),
  ].map((name) => ({
    name,
    message:
      'pure code (type:domain, type:util) must not import frameworks, databases or the network; put this in a service or adapter lib.',
  })),
  patterns: [
    {
      group: [
        '@nestjs/*',
        '@eventstore/*',
        '@electric-sql/*',
        '@fastify/*',
        'typeorm/*',
        'pg-*',
        'kafkajs/*',
        '@stablepay/*-service',
        '@stablepay/node-util',
      ],
      message:
        'pure code (type:domain, type:util) must not import frameworks, databases or the network; put this in a service or adapter lib.',
    },
  ],
};
export const PURE_SOURCE_ROOTS = sourceRootsTagged(['type:domain', 'type:util']);

const anyScope = [
  'scope:shared',
  'scope:chain',
  'scope:merchants',
  'scope:gateway',
  'scope:payments',
  'scope:subscriptions',
  'scope:ledger',
  'scope:indexer',
  'scope:settlement',
  'scope:payouts',
  'scope:webhooks',
  'scope:reports',
];
const serviceScopes = [
  'merchants',
  'payments',
  'subscriptions',
  'ledger',
  'indexer',
  'settlement',
  'payouts',
  'webhooks',
];

export default [
  ...nx.configs['flat/base'],
  ...nx.configs['flat/typescript'],
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      '**/tmp/**',
      '**/.nx/**',
      '**/coverage/**',
      '**/generated-js/**',
      '**/*.js',
      '**/*.mjs',
      '**/*.cjs',
    ],
  },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
        emitDecoratorMetadata: true,
        experimentalDecorators: true,
      },
    },
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          banTransitiveDependencies: false,
          allow: [],
          depConstraints: [
            {
              sourceTag: 'type:app',
              onlyDependOnLibsWithTags: [
                'type:service',
                'type:api',
                'type:adapter',
                'type:util',
                'type:contracts',
                'type:sdk',
                'type:testing',
              ],
            },
            {
              sourceTag: 'type:service',
              onlyDependOnLibsWithTags: [
                'type:service',
                'type:api',
                'type:domain',
                'type:adapter',
                'type:util',
                'type:contracts',
                'type:testing',
                'type:sdk',
              ],
            },
            {
              sourceTag: 'type:api',
              onlyDependOnLibsWithTags: [
                'type:domain',
                'type:adapter',
                'type:util',
                'type:contracts',
                'type:testing',
              ],
            },
            { sourceTag: 'type:domain', onlyDependOnLibsWithTags: ['type:domain', 'type:util'] },
            {
              sourceTag: 'type:adapter',
              onlyDependOnLibsWithTags: ['type:adapter', 'type:util', 'type:contracts', 'type:testing'],
            },
            { sourceTag: 'type:contracts', onlyDependOnLibsWithTags: ['type:util', 'type:contracts'] },
            { sourceTag: 'type:sdk', onlyDependOnLibsWithTags: ['type:util', 'type:contracts'] },
            {
              sourceTag: 'type:testing',
              onlyDependOnLibsWithTags: ['type:util', 'type:adapter', 'type:contracts'],
            },
            { sourceTag: 'type:util', onlyDependOnLibsWithTags: ['type:util'] },
            { sourceTag: 'scope:shared', onlyDependOnLibsWithTags: ['scope:shared'] },
            { sourceTag: 'scope:chain', onlyDependOnLibsWithTags: ['scope:shared', 'scope:chain'] },
            { sourceTag: 'scope:gateway', onlyDependOnLibsWithTags: anyScope },
            // A composition root (an app that wires several scopes together, e.g. webhook sources) sees every scope.
            { sourceTag: 'scope:composition', onlyDependOnLibsWithTags: anyScope },
            // Merchant settings (display name, branding, webhook URL and secrets, settlement configuration) are
            // read by the services that act for a merchant, through the merchants scope's read-side exports.
            // Reports (CSV exports) read the read models of the scopes they report on, and write nothing.
            {
              sourceTag: 'scope:reports',
              onlyDependOnLibsWithTags: [
                'scope:reports',
                'scope:shared',
                'scope:chain',
                'scope:payments',
                'scope:subscriptions',
                'scope:ledger',
              ],
            },
            ...serviceScopes.map((s) => ({
              sourceTag: `scope:${s}`,
              onlyDependOnLibsWithTags: [
                `scope:${s}`,
                'scope:shared',
                'scope:chain',
                ...(s === 'merchants' ? [] : ['scope:merchants']),
              ],
            })),
          ],
        },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: PURE_SOURCE_ROOTS.map((dir) => `${dir}/**/*.ts`),
    rules: { 'no-restricted-imports': ['error', PURE_CODE_BANNED_IMPORTS] },
  },
];
