// Test probe (run with --expose-gc): ResultArena ranges come back when their Buffers are
// collected, never while any view of them is alive, results outlive the arena object, and close()
// returns the memory of free ranges.
// Prints one JSON line of findings.
import { closeSync, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setImmediate as tick } from 'node:timers/promises';
import { markAsUntransferable } from 'node:worker_threads';

const here = dirname(fileURLToPath(import.meta.url));
const native = createRequire(import.meta.url)(resolve(here, '../build/Release/kvstore_native.node'));
const MiB = 1 << 20;
const take = (arena, n) => {
  const ab = arena.take(n);
  if (!ab) return undefined;
  markAsUntransferable(ab);
  return Buffer.from(ab);
};
const collect = async () => {
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await tick();
  }
};

const arena = new native.ResultArena(8 * MiB);
// 1. Dropped results return: 64 rounds of 4 MiB through an 8 MiB arena.
let refusedWhileCollecting = 0;
for (let i = 0; i < 64; i++) {
  if (!take(arena, 4 * MiB)) refusedWhileCollecting++;
  if (i % 2 === 1) await collect();
}
await collect();
const usedAfterDrop = arena.stats().used;

// 2. A kept subarray pins its whole range: churn the rest, the bytes stay.
const kept = take(arena, 2 * MiB)
  .fill(9)
  .subarray(1000, 2000);
let churned = 0;
for (let i = 0; i < 40; i++) {
  const b = take(arena, 2 * MiB);
  if (b) (b.fill(1), churned++);
  await collect();
}
const keptIntact = kept.every((v) => v === 9);

// 3. A transfer copies instead of moving the memory away.
const t = take(arena, 4096).fill(5);
const clone = structuredClone(t.buffer, { transfer: [t.buffer] });
const transferCopied = t.length === 4096 && t[0] === 5 && clone.byteLength === 4096;

// 4. A result outlives its arena object.
let survivor;
(() => {
  const a = new native.ResultArena(MiB);
  survivor = take(a, 64 * 1024).fill(3);
})();
await collect();
const survivorReadable = survivor.every((v) => v === 3);

// 5. close() gives the pages of free ranges back; a result held stays readable.
// Resident bytes of exactly [address, address + size): the present bit (63) of each page's entry
// in /proc/self/pagemap. (smaps counts whole mappings, and the kernel may merge the arena's with a
// neighbour whose pages come and go with the rest of the process.)
const PAGE = 4096;
const residentBytes = (address, size) => {
  const entries = Buffer.alloc((size / PAGE) * 8);
  const fd = openSync('/proc/self/pagemap', 'r');
  try {
    readSync(fd, entries, 0, entries.length, (address / PAGE) * 8);
  } finally {
    closeSync(fd);
  }
  let pages = 0;
  for (let i = 0; i < entries.length; i += 8) if (entries.readBigUInt64LE(i) >> 63n) pages++;
  return pages * PAGE;
};
const small = new native.ResultArena(8 * MiB);
const held = take(small, MiB).fill(4);
take(small, 4 * MiB).fill(6); // resident, then dropped
await collect();
const rssBeforeClose = residentBytes(small.address(), 8 * MiB);
small.close();
const rssAfterClose = residentBytes(small.address(), 8 * MiB); // the held result's 1 MiB at most
const closeGaveBack = rssBeforeClose >= 5 * MiB && rssAfterClose <= MiB && held.every((v) => v === 4) && small.take(4096) === undefined;

process.stdout.write(JSON.stringify({ refusedWhileCollecting, usedAfterDrop, keptIntact, churned, transferCopied, survivorReadable, closeGaveBack }) + '\n');
