// The project's lint rules (`make lint`): typescript-eslint's recommended set, the type-aware rules
// that catch real defects (a promise nobody awaits, a cast the types already guarantee, a thrown
// non-Error, an object printed as '[object Object]'), and rules that encode the design: the master's
// core and the operator's rendering are pure (time and randomness come in through an injected
// clock), and no test is focused. Not yet on: the no-unsafe-* family and no-explicit-any (about
// 1,300 findings where JSON and Kubernetes objects enter untyped; typing them is upkeep of its own).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** What pure code may not reach for: the injected clock gives time; randomness is an input. */
const impure = [
  { object: 'Date', property: 'now', message: 'pure code: take the time from the injected clock' },
  { object: 'performance', property: 'now', message: 'pure code: take the time from the injected clock' },
  { object: 'Math', property: 'random', message: 'pure code: randomness is an input, not a global' },
];
const impureGlobals = ['setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval', 'clearImmediate', 'queueMicrotask'].map((name) => ({
  name,
  message: 'pure code: timers belong to the shell that wraps it',
}));

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'proto/gen/**', 'operator/gen/**', 'clients/**', 'native/build/**', 'coverage/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { project: './tsconfig.test.json', tsconfigRootDir: import.meta.dirname } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/only-throw-error': 'error',
      '@typescript-eslint/no-base-to-string': 'error',
      '@typescript-eslint/no-implied-eval': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-explicit-any': 'off',
      // a handler that closes over a variable assigned later is the point, not a slip
      // a getter in an object literal reaches its owner through a named alias
      '@typescript-eslint/no-this-alias': ['error', { allowedNames: ['core', 'self', 'gate'] }],
      // control characters in our patterns are deliberate (terminal escapes, sanitised names)
      'no-control-regex': 'off',
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      'no-restricted-properties': ['error', ...['it', 'describe', 'test'].map((object) => ({ object, property: 'only', message: 'a focused test hides the others' }))],
    },
  },
  {
    files: ['master/core/**/*.ts', 'operator/render/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-properties': ['error', ...impure],
      'no-restricted-globals': ['error', ...impureGlobals],
    },
  },
  {
    // The shells that run on the one clock (common/clock.ts), so their tests run in virtual time.
    files: [
      'client/heartbeat.ts',
      'client/buffer-pool.ts',
      'client/master-channel.ts',
      'master/sweeper.ts',
      'master/heap-guard.ts',
      'master/ha/leader-elector.ts',
      'operator/reconcile/controller.ts',
      'operator/reconcile/informer.ts',
      'operator/election/leader-elector.ts',
    ],
    rules: {
      'no-restricted-properties': [
        'error',
        ...impure.filter((r) => r.object !== 'Math').map((r) => ({ ...r, message: 'take the time from the injected Clock (common/clock.ts)' })),
      ],
      'no-restricted-globals': [
        'error',
        ...impureGlobals
          .filter((g) => g.name !== 'queueMicrotask' && !g.name.endsWith('Immediate'))
          .map((g) => ({ ...g, message: 'schedule on the injected Clock (common/clock.ts)' })),
      ],
    },
  },
);
