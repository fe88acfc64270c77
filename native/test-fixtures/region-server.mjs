// Test peer: a separate process that maps a memfd region filled with a seeded pattern,
// serves it with a TransferEngine, and answers JSON-line commands on stdin:
//   {"cmd":"sha256","offset":n,"length":n} -> {"sha256":hex}
//   {"cmd":"fill","offset":n,"length":n,"byte":b} -> {"ok":true}
//   {"cmd":"unregister"} / {"cmd":"register"} -> {"ok":true}
//   {"cmd":"scratch"} -> {"ok":true}: registers and unregisters a plain (anonymous) Buffer
// Usage: node region-server.mjs <size> <seed> [engineOptionsJson (+ "regionKind": memfd|anonymous)]
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const native = createRequire(import.meta.url)(
  process.env.KVSTORE_NATIVE_ADDON ?? resolve(here, '../build/Release/kvstore_native.node'),
);

const size = Number(process.argv[2]);
const seed = Number(process.argv[3]) >>> 0;
const { regionKind = 'memfd', ...engineOptions } = JSON.parse(process.argv[4] ?? '{}');

export function fillPattern(bytes, seedValue) {
  // xorshift32 words: cheap, deterministic, and differs at every offset.
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.byteLength / 4));
  let x = seedValue || 0x9e3779b9;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    words[i] = x;
  }
  for (let i = words.length * 4; i < bytes.byteLength; i++) bytes[i] = i & 0xff;
}

const region = native.mapMemory({
  kind: regionKind, size, create: false, offset: 0, hugepage: false, hugepageSize: 2 << 20, arenaEnabled: false, arenaPoolSize: 0,
});
const bytes = new Uint8Array(region.buffer);
fillPattern(bytes, seed);
const engine = new native.TransferEngine({ host: '127.0.0.1', ...engineOptions });
const endpoint = engine.start(20000, 32000, Math.floor(Math.random() * 12000));
engine.registerRegion(region.address, region.size);

const reply = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
reply({ ready: true, endpoint, address: region.address, size: region.size, pid: process.pid });

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const c = JSON.parse(line);
  if (c.cmd === 'sha256') {
    reply({ sha256: createHash('sha256').update(bytes.subarray(c.offset, c.offset + c.length)).digest('hex') });
  } else if (c.cmd === 'fill') {
    bytes.fill(c.byte, c.offset, c.offset + c.length);
    reply({ ok: true });
  } else if (c.cmd === 'unregister') {
    engine.unregisterRegion(region.address);
    reply({ ok: true });
  } else if (c.cmd === 'scratch') {
    const b = Buffer.alloc(1 << 20);
    engine.registerRegion(native.addressOf(b), b.length);
    engine.unregisterRegion(native.addressOf(b));
    reply({ ok: true });
  } else if (c.cmd === 'register') {
    engine.registerRegion(region.address, region.size);
    reply({ ok: true });
  } else if (c.cmd === 'exit') {
    engine.close();
    region.handle.release();
    process.exit(0);
  } else {
    reply({ error: `unknown command ${c.cmd}` });
  }
});
rl.on('close', () => process.exit(0));
