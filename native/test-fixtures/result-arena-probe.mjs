// Test probe (run with --expose-gc): ResultArena ranges come back when their Buffers are
// collected, never while any view of them is alive, results outlive the arena object, and close()
// returns the memory of free ranges.
// Prints one JSON line of findings.
import { readFileSync } from 'node:fs';
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
const kept = take(arena, 2 * MiB).fill(9).subarray(1000, 2000);
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
const rssOf = (address) => {
  const blocks = readFileSync('/proc/self/smaps', 'utf8').split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/);
  const block = blocks.find((b) => parseInt(b.split('-')[0], 16) === address);
  return Number(/\nRss:\s+(\d+) kB/.exec(block)[1]) * 1024;
};
const small = new native.ResultArena(8 * MiB);
const held = take(small, MiB).fill(4);
take(small, 4 * MiB).fill(6); // resident, then dropped
await collect();
const rssBeforeClose = rssOf(small.address());
small.close();
// The kernel may merge the arena's mapping with an adjacent anonymous one into one smaps block, so
// compare the drop (7 MiB of free ranges, allowing for a neighbour's few pages) rather than a total.
const closeGaveBack = rssBeforeClose >= 5 * MiB && rssBeforeClose - rssOf(small.address()) >= 6 * MiB && held.every((v) => v === 4) && small.take(4096) === undefined;

process.stdout.write(JSON.stringify({ refusedWhileCollecting, usedAfterDrop, keptIntact, churned, transferCopied, survivorReadable, closeGaveBack }) + '\n');
