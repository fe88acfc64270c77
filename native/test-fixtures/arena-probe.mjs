// Test probe: in a fresh process (the arena is decided once per process), maps anonymous
// regions with the given arena settings and prints addresses and arena stats as JSON.
// Usage: node arena-probe.mjs <arenaEnabled 0|1> <poolSize> <size>...
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const native = createRequire(import.meta.url)(resolve(here, '../build/Release/kvstore_native.node'));
const [enabled, poolSize, ...sizes] = process.argv.slice(2);
const regions = sizes.map((s) =>
  native.mapMemory({
    kind: 'anonymous',
    size: Number(s),
    create: false,
    offset: 0,
    hugepage: false,
    hugepageSize: 2 << 20,
    arenaEnabled: enabled === '1',
    arenaPoolSize: Number(poolSize),
  }),
);
const ok = regions.every((r) => {
  const b = new Uint8Array(r.buffer);
  b.fill(0xab);
  return b[0] === 0xab && b[b.length - 1] === 0xab;
});
const stats = native.arenaStats();
for (const r of regions) r.handle.release();
process.stdout.write(JSON.stringify({ addresses: regions.map((r) => r.address), ok, stats }) + '\n');
