// Test helper: builds the addon once if native/build is missing (the Makefile normally ran
// `npm run build:native` already).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const nativeDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const addonPath = resolve(nativeDir, 'build/Release/kvstore_native.node');

export function ensureAddon(): void {
  if (existsSync(addonPath)) return;
  // npm puts its bundled node-gyp on the PATH of scripts; no download.
  execFileSync('npm', ['run', 'build:native'], { cwd: resolve(nativeDir, '..'), stdio: 'inherit' });
}
