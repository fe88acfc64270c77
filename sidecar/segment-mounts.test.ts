// The unmount timeline of SegmentMounts on a manual clock (the timer seam): the final unmount at
// the end of the grace period, the memory released only a read lease later, shutdown doing the
// same for every segment; and the all-or-nothing rules of mount and unmount. The owner is a
// recorder standing in for the Client at the SegmentOwner seam; the real processes run in
// e2e/store-rest.test.ts.
import type { SegmentInfo } from '../client/client.js';
import type { MapMemoryOptions, MappedRegion } from '../client/native-port.js';
import { InvalidParamsError } from '../client/errors.js';
import { MemoryError, MemoryErrorCode } from '../native/errors.js';
import { RestError } from './mount-request.js';
import { SegmentMounts, type SegmentOwner } from './segment-mounts.js';

const MiB = 1024 * 1024;

function manualClock() {
  let now = 0;
  const timers: { at: number; fn: () => void }[] = [];
  const flush = () => new Promise((r) => setImmediate(r));
  return {
    schedule: (ms: number, fn: () => void) => void timers.push({ at: now + ms, fn }),
    now: () => now,
    /** Moves time forward, running each timer due on the way (and what it starts) in order. */
    async advance(ms: number) {
      const end = now + ms;
      await flush();
      for (;;) {
        timers.sort((a, b) => a.at - b.at);
        const next = timers[0];
        if (!next || next.at > end) break;
        timers.shift();
        now = next.at;
        next.fn();
        await flush();
      }
      now = end;
      await flush();
    },
  };
}

/** Records what SegmentMounts asks of the client, with the manual clock's time. */
function recordingOwner(clock: { now: () => number }, opts: { failAdd?: number } = {}) {
  const segs = new Map<string, SegmentInfo>([['global', { name: 'ep:1', id: 'global', address: 0, size: MiB, state: 'mounted', memory: 'dram' }]]);
  const calls: string[] = [];
  let n = 0;
  const owner: SegmentOwner = {
    async addSegment(region: MappedRegion) {
      n++;
      if (n === opts.failAdd) throw new InvalidParamsError('the master refused the mount');
      const id = `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
      segs.set(id, { name: `ep:1/${n}`, id, address: region.address, size: region.size, state: 'mounted', memory: 'dram' });
      calls.push(`${clock.now()} add ${id.slice(-1)}`);
      return { name: `ep:1/${n}`, id };
    },
    async unmountSegment(id: string, grace: number) {
      calls.push(`${clock.now()} unmount ${id.slice(-1)} grace ${grace}`);
      const s = segs.get(id)!;
      if (s.state !== 'unmounted') s.state = grace > 0 ? 'draining' : 'unmounted';
    },
    async releaseSegment(id: string) {
      calls.push(`${clock.now()} release ${id.slice(-1)}`);
      segs.delete(id);
    },
    get mountedSegments() {
      return [...segs.values()].map((s) => ({ ...s }));
    },
  };
  return { owner, calls };
}

function fakeRegions() {
  const released: number[] = [];
  let next = 1;
  const map = (o: MapMemoryOptions): MappedRegion => {
    if (o.kind === 'shm' && (o.offset ?? 0) >= 2 * MiB) throw new MemoryError(MemoryErrorCode.INVALID_ARGUMENT, 'shm object holds fewer bytes than offset+size');
    const address = next++ * 0x1000_0000;
    return { address, size: o.size, release: () => void released.push(address) } as unknown as MappedRegion;
  };
  return { map, released };
}

function setup(opts: { failAdd?: number } = {}) {
  const clock = manualClock();
  const { owner, calls } = recordingOwner(clock, opts);
  const regions = fakeRegions();
  const mounts = new SegmentMounts({ owner, mapMemory: regions.map, maxSegmentSize: MiB, leaseTtlMs: 5000, alignment: 4096, schedule: clock.schedule });
  return { clock, owner, calls, regions, mounts };
}

describe('SegmentMounts', () => {
  it('unmount with a grace period: final unmount at its end, memory released one read lease later', async () => {
    const { clock, calls, mounts } = setup();
    const { segmentIds } = await mounts.mountMemory({ size: MiB, protocol: 'tcp', location: '' });
    calls.length = 0;
    await mounts.unmount('memory', { segmentIds, graceSeconds: 2 });
    expect(calls).toEqual(['0 unmount 1 grace 2']);
    await clock.advance(1999);
    expect(calls).toEqual(['0 unmount 1 grace 2']);
    await clock.advance(1);
    expect(calls).toEqual(['0 unmount 1 grace 2', '2000 unmount 1 grace 0']);
    await clock.advance(4999);
    expect(calls).toHaveLength(2); // a read granted just before 2000 may run until 7000
    await clock.advance(1);
    expect(calls).toEqual(['0 unmount 1 grace 2', '2000 unmount 1 grace 0', '7000 release 1']);
    await mounts.drained();
  });

  it('unmount without a grace period releases at once', async () => {
    const { calls, mounts } = setup();
    const { segmentIds } = await mounts.mountMemory({ size: MiB, protocol: 'tcp', location: '' });
    await mounts.unmount('memory', { segmentIds, graceSeconds: 0 });
    expect(calls).toEqual(['0 add 1', '0 release 1']);
  });

  it('shutdown unmounts every segment, the global one too, and resolves one read lease after the grace period', async () => {
    const { clock, calls, mounts } = setup();
    const { segmentIds } = await mounts.mountMemory({ size: MiB, protocol: 'tcp', location: '' });
    const [draining] = (await mounts.mountMemory({ size: MiB, protocol: 'tcp', location: '' })).segmentIds;
    await mounts.unmount('memory', { segmentIds: [draining], graceSeconds: 60 });
    calls.length = 0;
    let done = false;
    void mounts.shutdown(3).then(() => (done = true));
    await clock.advance(0);
    expect(calls.sort()).toEqual(['0 unmount 1 grace 3', '0 unmount l grace 3']); // "l": the global segment
    await clock.advance(3000);
    // the draining REST segment's own grace (60 s) is cut short
    expect(calls.slice(2).sort()).toEqual(['3000 unmount 1 grace 0', '3000 unmount 2 grace 0', '3000 unmount l grace 0']);
    await clock.advance(4999);
    expect(done).toBe(false);
    await clock.advance(1);
    expect(done).toBe(true);
    // REST calls are refused from now on
    await expect(mounts.mountMemory({ size: MiB, protocol: 'tcp', location: '' })).rejects.toMatchObject({ status: 503 });
    await expect(mounts.unmount('memory', { segmentIds, graceSeconds: 0 })).rejects.toMatchObject({ status: 503 });
    // the draining chain stood down: the client's close() gives its memory back
    await clock.advance(120_000);
    expect(calls.filter((c) => c.includes('release'))).toEqual([]);
  });

  it('a mount that fails part-way releases every region it mapped and every segment it added', async () => {
    const refusedByMaster = setup({ failAdd: 2 });
    const err = await refusedByMaster.mounts.mountMemory({ size: 3 * MiB, protocol: 'tcp', location: '' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RestError);
    expect(err).toMatchObject({ status: 400, message: expect.stringMatching(/mount: the master refused the mount/) });
    expect(refusedByMaster.calls).toEqual(['0 add 1', '0 release 1']);
    expect(refusedByMaster.regions.released).toHaveLength(1); // the piece addSegment refused; piece 1 went back through releaseSegment
    expect(refusedByMaster.owner.mountedSegments.map((s) => s.id)).toEqual(['global']);

    const pastTheEnd = setup();
    const err2 = await pastTheEnd.mounts.mountShm({ name: 'obj', size: 3 * MiB, offset: 0, protocol: 'tcp', location: '' }).catch((e: unknown) => e);
    expect(err2).toMatchObject({ status: 400, message: expect.stringMatching(/fewer bytes than offset\+size/) });
    expect(pastTheEnd.calls).toEqual(['0 add 1', '0 add 2', '0 release 2', '0 release 1']);
  });

  it('an unmount is all or nothing: every id is checked before any is unmounted', async () => {
    const { calls, mounts } = setup();
    const mem = (await mounts.mountMemory({ size: MiB, protocol: 'tcp', location: '' })).segmentIds;
    const shm = (await mounts.mountShm({ name: 'obj', size: MiB, offset: 0, protocol: 'tcp', location: 'x' })).segmentIds;
    calls.length = 0;
    const unknown = '00000000-0000-4000-8000-00000000000f';
    await expect(mounts.unmount('memory', { segmentIds: [...mem, unknown], graceSeconds: 0 })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/nothing unmounted/),
    });
    await expect(mounts.unmount('memory', { segmentIds: [...mem, ...shm], graceSeconds: 0 })).rejects.toMatchObject({
      message: expect.stringMatching(/mounted by \/api\/mount_shm/),
    });
    await expect(mounts.unmount('shm', { segmentIds: ['global'], graceSeconds: 0 })).rejects.toMatchObject({
      message: expect.stringMatching(/not a segment mounted through the REST API/),
    });
    expect(calls).toEqual([]);
    expect(mounts.describe(shm[0])).toEqual({ origin: 'shm', location: 'x' });
  });
});
