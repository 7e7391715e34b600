import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

/**
 * Module boundaries (drawn in docs/architecture.md). Each folder of src/ lists the folders it
 * may import; an import of any other folder of src/ fails lint. Imports go through `@app/…`,
 * so a relative `../` import is refused everywhere in src/.
 */
export const SRC_FOLDERS = [
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
  'sdk-formats',
];
const FOUNDATION = ['config', 'common', 'database'];
export const ALLOWED_IMPORTS = {
  config: [],
  common: ['config', 'database'],
  database: ['config'],
  audit: FOUNDATION,
  auth: [...FOUNDATION, 'audit'],
  ingest: [...FOUNDATION, 'auth'],
  // Plans stand on ingest: their endpoints read bodies with its reader, the dry run is its
  // evaluation, the replay writes through its insert. Ingest applies plans through a port in common.
  plans: [...FOUNDATION, 'audit', 'auth', 'ingest'],
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
  'sdk-formats': [...FOUNDATION, 'auth', 'ingest'],
};

/** No class longer than `max` physical lines (comments and blank lines count). */
const maxClassLines = {
  meta: { type: 'suggestion', schema: [{ type: 'integer', minimum: 1 }] },
  create(context) {
    const max = context.options[0] ?? 300;
    const check = (node) => {
      const lines = node.loc.end.line - node.loc.start.line + 1;
      if (lines > max) {
        const name = node.id?.name ?? 'anonymous';
        context.report({ node, message: `Class ${name} has ${lines} lines; at most ${max} are allowed.` });
      }
    };
    return { ClassDeclaration: check, ClassExpression: check };
  },
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
  // Physical lines, comments and blank lines included: no function over 80 and no class over 300
  // in the product's code. Tests and benchmarks are exempt (a describe block is one long function).
  {
    files: ['packages/client/src/**/*.ts', 'src/**/*.ts', 'web/src/**/*.ts'],
    ignores: ['**/*.spec.ts', 'packages/client/src/generated/**'],
    plugins: { local: { rules: { 'max-class-lines': maxClassLines } } },
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: false, skipComments: false }],
      'local/max-class-lines': ['error', 300],
    },
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
