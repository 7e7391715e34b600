import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

/**
 * Module boundaries (drawn in docs/architecture.md). Each folder of src/ lists the folders it
 * may import; an import of any other folder of src/ fails lint. Imports go through `@app/…`,
 * so a relative `../` import is refused everywhere in src/.
 */
const SRC_FOLDERS = [
  'config',
  'common',
  'database',
  'audit',
  'auth',
  'ingest',
  'plans',
  'events',
  'export',
  'rollups',
  'insights',
  'storage',
  'ops',
  'dashboard',
  'cli',
  'privacy',
];
const FOUNDATION = ['config', 'common', 'database'];
const ALLOWED_IMPORTS = {
  config: [],
  common: ['config', 'database'],
  database: ['config'],
  audit: FOUNDATION,
  auth: [...FOUNDATION, 'audit'],
  ingest: [...FOUNDATION, 'auth', 'plans'],
  plans: [...FOUNDATION, 'audit'],
  events: [...FOUNDATION, 'auth'],
  export: [...FOUNDATION, 'auth'],
  rollups: [...FOUNDATION, 'audit', 'auth'],
  // Beside rollups, on top of it: insights registers a step of the rollup computation.
  insights: [...FOUNDATION, 'audit', 'auth', 'rollups'],
  storage: FOUNDATION,
  ops: FOUNDATION,
  dashboard: FOUNDATION,
  cli: [...FOUNDATION, 'audit', 'auth', 'rollups', 'insights', 'privacy', 'storage', 'export', 'plans', 'ingest'],
  privacy: [...FOUNDATION, 'audit', 'auth', 'ingest', 'rollups', 'storage', 'plans'],
};

function boundaryRules(folder) {
  const forbidden = SRC_FOLDERS.filter((f) => f !== folder && !ALLOWED_IMPORTS[folder].includes(f));
  return {
    files: [`src/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['../*'], message: 'Import through the @app/ alias.' },
            {
              group: forbidden.map((f) => `@app/${f}/*`),
              message: `src/${folder} may import only ${['its own files', ...ALLOWED_IMPORTS[folder]].join(', ')} (docs/architecture.md).`,
            },
          ],
        },
      ],
    },
  };
}

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'packages/*/dist/**',
      'packages/client/src/generated/**',
      'node_modules/**',
      'coverage/**',
      '.data/**',
      'bench/results/**',
      'bench/.cache/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        URL: 'readonly',
        Response: 'readonly',
        __dirname: 'readonly',
        module: 'writable',
        require: 'readonly',
      },
    },
    rules: {
      'preserve-caught-error': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'off',
      'no-restricted-imports': ['error', { patterns: ['../../*'] }],
    },
  },
  { files: ['**/*.mjs'], rules: { 'no-restricted-imports': 'off' } },
  // No function over 80 lines (blank lines and comments not counted) in the product's code; tests
  // and benchmarks are exempt (a describe block is one long function by nature).
  {
    files: ['packages/**/*.ts', 'src/**/*.ts', 'web/**/*.ts'],
    ignores: ['src/**/*.spec.ts', 'web/**/*.spec.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  ...SRC_FOLDERS.map(boundaryRules),
  {
    files: ['src/**/*.ts'],
    ignores: ['src/config/**'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Read configuration through src/config.' },
      ],
      // Periodic background work starts one way (src/common/jobs.ts): @Interval for a fixed
      // period, startJob for a configured one.
      'no-restricted-globals': [
        'error',
        {
          name: 'setInterval',
          message: 'Start background work with @Interval or startJob (src/common/jobs.ts).',
        },
      ],
    },
  },
);
