// Lint rules for the whole workspace. The module-boundary constraints are the architecture's
// dependency rules (docs/architecture.md): apps never import apps, domain libs import only util libs,
// and every scope sees only itself, the shared scope and the chain scope.
import nx from '@nx/eslint-plugin';

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
];
