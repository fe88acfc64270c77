// Prints the master core's heap cost per object and the cost of its hot calls (not a test:
// figures only). Run after `npm run build`:
//   node --expose-gc dist/bench/master-core-footprint.js [objects]
import { defaultMasterCoreConfig, MasterCore, SeededRng } from '../master/core/master-core.js';

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g === undefined) throw new Error('run node with --expose-gc');
  g();
  g();
}

function main(): void {
  const n = Number(process.argv[2] ?? 1_000_000);
  const core = new MasterCore({ ...defaultMasterCoreConfig }, new SeededRng(1));
  for (let i = 0; i < 4; i++) {
    core.mountSegment(
      { buffer: 2 ** 40 * (i + 1), size: 2 ** 40, segment_name: `seg-${i}`, client_id: 'c', segment_id: '', te_endpoint: `10.0.0.${i}:1`, protocol: 'tcp', incarnation: 0 },
      0,
    );
  }
  const config = { replica_num: 1, with_soft_pin: false, with_hard_pin: false, preferred_segment: '' };
  gc();
  const before = process.memoryUsage().heapUsed;
  let now = 1000.5;
  let t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const key = `key-${i}`;
    core.putStart({ key, value_length: 4096, config, slice_lengths: [4096] }, now);
    core.putEnd({ key, replica_type: 0, slice_checksums: [] }, now);
    now += 0.001;
  }
  const putMs = performance.now() - t0;
  gc();
  const perObject = (process.memoryUsage().heapUsed - before) / n;
  console.log(`objects: ${n}, heap per object (key included): ${perObject.toFixed(1)} B, PutStart+PutEnd: ${((putMs * 1000) / n).toFixed(2)} us`);
  const calls = Math.min(n, 500_000);
  t0 = performance.now();
  for (let i = 0; i < calls; i++) core.getReplicaList({ key: `key-${(i * 7919) % n}` }, now + i * 0.001);
  console.log(`GetReplicaList: ${(((performance.now() - t0) * 1000) / calls).toFixed(2)} us/call (key string built per call)`);
  t0 = performance.now();
  core.stats(now + 10);
  console.log(`stats: ${(performance.now() - t0).toFixed(2)} ms`);
  // A small segment holding 1000 objects, to time an unmount that touches only those.
  core.mountSegment({ buffer: 2 ** 46, size: 2 ** 30, segment_name: 'small', client_id: 'c', segment_id: '', te_endpoint: '10.0.1.1:1', protocol: 'tcp', incarnation: 0 }, now);
  for (let i = 0; i < 1000; i++) {
    const key = `small-${i}`;
    core.putStart({ key, value_length: 4096, config: { ...config, preferred_segment: 'small' }, slice_lengths: [4096] }, now);
    core.putEnd({ key, replica_type: 0, slice_checksums: [] }, now);
  }
  // One eviction round (evictionRatio of the objects), paid in bounded steps as sweep() does.
  const evictAt = now + 100_000;
  let evicted = 0;
  let steps = 0;
  let worst = 0;
  t0 = performance.now();
  for (;;) {
    const s0 = performance.now();
    const e = core.evict(evictAt);
    worst = Math.max(worst, performance.now() - s0);
    evicted += e.evicted;
    steps++;
    if (e.pending === 0) break;
  }
  const evictMs = performance.now() - t0;
  console.log(`evict: ${evicted} objects in ${evictMs.toFixed(1)} ms (${((evictMs * 1000) / evicted).toFixed(2)} us/object), ${steps} steps, longest step ${worst.toFixed(1)} ms`);
  // Unmounting walks every object once (no per-segment index): the small segment costs about what a big one does.
  let objects = core.stats(evictAt).objects;
  t0 = performance.now();
  core.unmountSegment({ segment_name: 'small', client_id: 'c', grace_period_seconds: 0 }, evictAt);
  const smallMs = performance.now() - t0;
  console.log(`unmount of a segment holding 1000 of ${objects} objects: ${smallMs.toFixed(2)} ms, dropped ${objects - core.stats(evictAt).objects}`);
  objects = core.stats(evictAt).objects;
  t0 = performance.now();
  core.unmountSegment({ segment_name: 'seg-0', client_id: 'c', grace_period_seconds: 0 }, evictAt);
  const left = core.stats(evictAt).objects;
  console.log(`unmount of one of four big segments: ${objects - left} objects dropped in ${(performance.now() - t0).toFixed(1)} ms, ${left} left`);
}

main();
