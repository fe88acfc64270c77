// Test peer: a separate process that maps a memfd region filled with a seeded pattern,
// serves it with a TransferEngine, and answers JSON-line commands on stdin (one reply each, in
// order; the `*Watch` commands also emit an {"event":"settled","id"} line later):
//   {"cmd":"sha256","offset":n,"length":n} -> {"sha256":hex}
//   {"cmd":"crc32c","offset":n,"length":n} -> {"crc32c":n} (CRC-32C of the range, unsigned)
//   {"cmd":"fill","offset":n,"length":n,"byte":b} -> {"ok":true}
//   {"cmd":"unregister"} -> {"ok":true,"registered":bool} once no chunk moves bytes in the region
//   {"cmd":"register"} -> {"ok":true,"incarnation":n}
//   {"cmd":"scratch"} -> {"ok":true}: registers and unregisters a plain (anonymous) Buffer
//   {"cmd":"mapLocal","size":n} -> {"address":n,"incarnation":n}: a second memfd region, serve: false
//   {"cmd":"setFenceWatch","id":n,"below":n,"revoked":[n]} / {"cmd":"unregisterWatch","id":n}
//       -> {"settledAtOnce":bool} (after the microtasks of the call ran), later the settled event
//   {"cmd":"transfer","op":"read"|"write","endpoint":s,"remoteAddress":n,"offset":n,"length":n,...}
//       -> {"ok":true} or {"error":code,"message":s} (offset: into this peer's own region)
//   {"cmd":"stats"} -> engine.stats()      {"cmd":"ping"} -> {"ok":true}
//   {"cmd":"timer"} -> {"ok":true} from a 10 ms setTimeout (the event loop's timers fire)
// Usage: node region-server.mjs <size> <seed> [engineOptionsJson (+ "regionKind": memfd|anonymous,
//        "authSecretHex": the engine's authSecret as hex, "regionPath": map this existing file
//        (kind file, from "regionOffset", default 0) as the region and leave its bytes as they
//        are: no pattern, no page touched)]
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const native = createRequire(import.meta.url)(process.env.KVSTORE_NATIVE_ADDON ?? resolve(here, '../build/Release/kvstore_native.node'));

const size = Number(process.argv[2]);
const seed = Number(process.argv[3]) >>> 0;
const { regionKind = 'memfd', authSecretHex, regionPath, regionOffset = 0, ...engineOptions } = JSON.parse(process.argv[4] ?? '{}');
if (authSecretHex !== undefined) engineOptions.authSecret = Buffer.from(authSecretHex, 'hex');

export function fillPattern(bytes, seedValue) {
  // xorshift32 words: cheap, deterministic, and differs at every offset.
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.byteLength / 4));
  let x = seedValue || 0x9e3779b9;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    words[i] = x;
  }
  for (let i = words.length * 4; i < bytes.byteLength; i++) bytes[i] = i & 0xff;
}

const mapRequest = (kind, bytes) => ({
  kind,
  size: bytes,
  create: false,
  offset: 0,
  hugepage: false,
  hugepageSize: 2 << 20,
  arenaEnabled: false,
  arenaPoolSize: 0,
});
// Starts libuv's thread pool now, so a test that limits this process's threads later limits only the engine's.
await fs.stat(here);
const region = native.mapMemory(regionPath ? { ...mapRequest('file', size), path: regionPath, offset: regionOffset } : mapRequest(regionKind, size));
const bytes = new Uint8Array(region.buffer);
if (!regionPath) fillPattern(bytes, seed);
const engine = new native.TransferEngine({ host: '127.0.0.1', ...engineOptions });
const endpoint = engine.start(20000, 32000, Math.floor(Math.random() * 12000));
let incarnation = engine.registerRegion(region.address, region.size);
const locals = [];

const reply = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
reply({ ready: true, endpoint, address: region.address, size: region.size, pid: process.pid, incarnation });

// Replies once the call's own microtasks ran, saying whether its promise had settled by then;
// the settled event follows whenever it does.
function watch(id, promise) {
  let settled = false;
  promise.then(
    () => {
      settled = true;
      reply({ event: 'settled', id });
    },
    (e) => {
      settled = true;
      reply({ event: 'settled', id, error: e.code ?? String(e) });
    },
  );
  return new Promise((res) => setImmediate(() => res({ settledAtOnce: settled })));
}

const handlers = {
  sha256: (c) => ({
    sha256: createHash('sha256')
      .update(bytes.subarray(c.offset, c.offset + c.length))
      .digest('hex'),
  }),
  crc32c: (c) => ({ crc32c: native.crc32c(bytes.subarray(c.offset, c.offset + c.length), 0) }),
  fill: (c) => {
    bytes.fill(c.byte, c.offset, c.offset + c.length);
    return { ok: true };
  },
  unregister: async () => ({ ok: true, registered: await engine.unregisterRegion(region.address) }),
  register: () => {
    incarnation = engine.registerRegion(region.address, region.size);
    return { ok: true, incarnation };
  },
  scratch: async () => {
    const b = Buffer.alloc(1 << 20);
    engine.registerRegion(native.addressOf(b), b.length, { serve: false });
    await engine.unregisterRegion(native.addressOf(b));
    return { ok: true };
  },
  mapLocal: (c) => {
    const r = native.mapMemory(mapRequest('memfd', c.size));
    locals.push(r);
    return { address: r.address, incarnation: engine.registerRegion(r.address, r.size, { serve: false }) };
  },
  setFenceWatch: (c) => watch(c.id, engine.setFence(region.address, { below: c.below, revoked: c.revoked })),
  unregisterWatch: (c) => watch(c.id, engine.unregisterRegion(region.address)),
  transfer: async (c) => {
    const { cmd, offset, ...op } = c;
    try {
      await engine.transfer([{ ...op, localAddress: region.address + offset }]);
      return { ok: true };
    } catch (e) {
      return { error: e.code, message: e.message };
    }
  },
  stats: () => engine.stats(),
  ping: () => ({ ok: true }),
  timer: () => new Promise((res) => setTimeout(() => res({ ok: true }), 10)),
};

// Commands run one at a time, in order, so replies come back in the order asked.
let queue = Promise.resolve();
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const c = JSON.parse(line);
  if (c.cmd === 'exit') {
    engine.close();
    region.handle.release();
    process.exit(0);
  }
  queue = queue.then(async () => {
    const h = handlers[c.cmd];
    if (!h) return reply({ error: `unknown command ${c.cmd}` });
    const out = await h(c);
    if (out !== undefined) reply(out);
  });
});
rl.on('close', () => process.exit(0));
