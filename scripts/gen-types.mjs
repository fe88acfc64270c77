// Generates TypeScript types from the .proto files (proto/gen/), so no message type is hand-copied.
import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';

const protos = readdirSync('proto')
  .filter((f) => f.endsWith('.proto'))
  .map((f) => `proto/${f}`);
rmSync('proto/gen', { recursive: true, force: true });
execFileSync(
  'node_modules/.bin/proto-loader-gen-types',
  ['--longs=Number', '--enums=Number', '--defaults', '--keepCase', '--oneofs', '--grpcLib=@grpc/grpc-js', '-O', 'proto/gen', ...protos],
  { stdio: 'inherit' },
);

// NodeNext resolution wants explicit extensions on relative imports; the generator omits them.
import { readFileSync, writeFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (p.endsWith('.ts')) {
      writeFileSync(p, readFileSync(p, 'utf8').replace(/from '(\.\.?\/[^']+)'/g, "from '$1.js'"));
    }
  }
}
walk('proto/gen');
