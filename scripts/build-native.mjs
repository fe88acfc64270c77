// Builds the C++ addon with node-gyp against the headers of the node that runs this script.
// node-gyp otherwise looks for headers in a user-level config (`nodedir`) or downloads them from
// nodejs.org; neither is there on a fresh machine without network access to nodejs.org. A node
// installed from a distribution package or a tarball has its headers in <prefix>/include/node.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';

const prefix = dirname(dirname(process.execPath));
const args = ['rebuild', '--directory=native'];
if (existsSync(join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);

// npm tells run scripts where its bundled node-gyp is; outside npm, look beside npm itself.
function nodeGypPath() {
  if (process.env.npm_config_node_gyp && existsSync(process.env.npm_config_node_gyp)) {
    return process.env.npm_config_node_gyp;
  }
  const candidates = [join(prefix, 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')];
  try {
    candidates.push(createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js'));
  } catch {
    // not installed locally
  }
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    console.error('build-native: node-gyp not found (run this through npm, or install node-gyp)');
    process.exit(1);
  }
  return found;
}

const result = spawnSync(process.execPath, [nodeGypPath(), ...args], { stdio: 'inherit' });
process.exit(result.status ?? 1);
