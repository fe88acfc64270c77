// The TypeScript side of tests/test_interop.py: a TS DummyClient (dist/client/index.js) of the
// same real client. Arguments: ADDRESS SHM_DIR then operations, each printed as one JSON line:
//   get:KEY              -> {"op":"get","key":KEY,"size":N,"sha256":HEX}
//   put:KEY:SIZE:SEED    -> {"op":"put","key":KEY}   (value: pattern(SIZE, SEED), put from an allocBuffer lease)
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const { DummyClient } = await import(join(repo, 'dist', 'client', 'index.js'));
const [address, shmDir, ...ops] = process.argv.slice(2);

/** The same bytes as tests/test_interop.py's pattern(). */
function pattern(size, seed) {
  const b = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) b[i] = (i * 131 + seed * 7 + (i >> 8)) & 255;
  return b;
}

const c = await DummyClient.connect({ address, shmDir, bufferSize: 32 << 20 });
try {
  for (const op of ops) {
    const [kind, key, size, seed] = op.split(':');
    if (kind === 'get') {
      const v = await c.get(key);
      console.log(JSON.stringify({ op: kind, key, size: v.length, sha256: createHash('sha256').update(v).digest('hex') }));
    } else {
      const lease = await c.allocBuffer(Number(size));
      lease.buffer.set(pattern(Number(size), Number(seed)));
      await c.put(key, lease.buffer);
      lease.release();
      console.log(JSON.stringify({ op: kind, key }));
    }
  }
} finally {
  await c.close();
}
