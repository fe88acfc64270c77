// Jest runs the TypeScript sources directly (ESM, transpiled per file by ts-jest without type
// checking: `npm run typecheck` type-checks everything, tests included). The e2e tests spawn the compiled
// binaries in dist/, so `make test` builds first.
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': [
      'ts-jest',
      { useESM: true, tsconfig: { isolatedModules: true, module: 'ESNext', target: 'ES2022', moduleResolution: 'Bundler', verbatimModuleSyntax: false, sourceMap: true } },
    ],
  },
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testMatch: ['<rootDir>/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  testTimeout: 60000,
  // one cluster secret for every process the tests start (e2e/global-secret.ts)
  globalSetup: '<rootDir>/e2e/global-secret.ts',
};
