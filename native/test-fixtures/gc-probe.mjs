// Test probe (run with --expose-gc): a region dropped without release() is unmapped by the
// ArrayBuffer finalizer. Prints {"mappedBefore":bool,"unmappedAfterGc":bool}.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setImmediate as tick } from 'node:timers/promises';

const here = dirname(fileURLToPath(import.meta.url));
const native = createRequire(import.meta.url)(resolve(here, '../build/Release/kvstore_native.node'));
const isMapped = (address) =>
  readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .some((l) => l.startsWith(address.toString(16) + '-'));

let address;
(() => {
  const r = native.mapMemory({
    kind: 'memfd',
    size: 8 << 20,
    create: false,
    offset: 0,
    hugepage: false,
    hugepageSize: 2 << 20,
    arenaEnabled: false,
    arenaPoolSize: 0,
  });
  new Uint8Array(r.buffer).fill(1);
  address = r.address;
})();
const mappedBefore = isMapped(address);
let unmapped = false;
for (let i = 0; i < 100 && !unmapped; i++) {
  globalThis.gc();
  await tick();
  unmapped = !isMapped(address);
}
process.stdout.write(JSON.stringify({ mappedBefore, unmappedAfterGc: unmapped }) + '\n');
