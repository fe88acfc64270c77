// The copier's batches (replica-copy.ts ReplicaCopier): a Ping reply's copies are made together
// and reported in one BatchReplicaCopied; an older master that refuses the method gets one
// ReplicaCopied per copy from then on; the next Ping is asked for as soon as the copies are made,
// not after the report's reply, or as soon as a batch is down to its last file write.
import type { BatchReplicaCopiedRequest } from '../proto/gen/store/BatchReplicaCopiedRequest.js';
import type { ReplicaCopiedRequest } from '../proto/gen/store/ReplicaCopiedRequest.js';
import type { ReplicaCopy__Output } from '../proto/gen/store/ReplicaCopy.js';
import { TransferError } from './errors.js';
import { MasterProtocolError } from './master-channel-errors.js';
import { ReplicaCopier } from './replica-copy.js';

const copy = (id: number): ReplicaCopy__Output => ({ copy_id: id, key: `k${id}`, source: null, target: null, slice_checksums: [] });

function copier(opts: { batch?: 'ok' | 'old-master'; fail?: number } = {}) {
  const batches: BatchReplicaCopiedRequest[] = [];
  const singles: ReplicaCopiedRequest[] = [];
  const events: string[] = [];
  let answer: (() => void) | undefined;
  const c = new ReplicaCopier({
    clientId: () => 'me',
    copy: async (cs) => cs.map((x) => (x.copy_id === opts.fail ? new TransferError('target unreachable') : undefined)),
    reportBatch: (req) => {
      if (opts.batch === 'old-master') {
        events.push('refused');
        return Promise.reject(new MasterProtocolError('BatchReplicaCopied refused by master 127.0.0.1:1: unknown method 29', '127.0.0.1:1'));
      }
      batches.push(req);
      events.push('report');
      return new Promise<void>((r) => (answer = r));
    },
    report: async (req) => void singles.push(req),
    log: () => {},
    onIdle: () => events.push('idle'),
  });
  return { c, batches, singles, events, answer: () => answer?.() };
}

describe('ReplicaCopier', () => {
  it("reports a Ping reply's copies in one call, failures with ok false, and asks for more before the report is answered", async () => {
    const t = copier({ fail: 2 });
    t.c.start([copy(1), copy(2), copy(3)]);
    expect(t.c.canTake).toBe(true); // 3 < COPIES_AT_ONCE
    await new Promise((r) => setImmediate(r));
    expect(t.batches).toEqual([
      {
        client_id: 'me',
        outcomes: [
          { copy_id: 1, ok: true, failed_segments: [] },
          { copy_id: 2, ok: false, failed_segments: [] },
          { copy_id: 3, ok: true, failed_segments: [] },
        ],
      },
    ]);
    expect(t.events).toEqual(['report', 'idle']); // the next Ping leaves with the report, not after its reply
    let drained = false;
    const d = t.c.drain().then(() => (drained = true));
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false); // the report is still on its way
    t.answer();
    await d;
    expect(t.singles).toEqual([]);
  });

  it('a batch down to its last write lets the next Ping take copies and asks for it then, once, not again when done', async () => {
    const events: string[] = [];
    const ends: (() => void)[] = [];
    const nearly: (() => void)[] = [];
    const c = new ReplicaCopier({
      clientId: () => 'me',
      copy: (cs, nearlyDone) => {
        nearly.push(nearlyDone);
        return new Promise((r) => ends.push(() => r(cs.map(() => undefined))));
      },
      reportBatch: async () => void events.push('report'),
      report: async () => {},
      log: () => {},
      onIdle: () => events.push('idle'),
    });
    const big = Array.from({ length: 128 }, (_, i) => copy(i));
    c.start(big);
    expect(c.canTake).toBe(false); // 128 copies being made
    nearly[0]();
    nearly[0](); // said twice: counted once
    expect(c.canTake).toBe(true);
    expect(c.idle).toBe(false);
    expect(events).toEqual(['idle']); // the next Ping now, while the last write runs
    c.start(big.map((x) => copy(x.copy_id + 1000))); // that Ping's copies
    expect(c.canTake).toBe(false);
    ends[0]();
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(['idle', 'report']); // done: reported, no second ask
    ends[1](); // a batch that never got down to a last write: asks when done, as before
    await c.drain();
    expect(events).toEqual(['idle', 'report', 'report', 'idle']);
    expect(c.idle).toBe(true);
    expect(c.canTake).toBe(true);
  });

  it('an older master (no BatchReplicaCopied): one ReplicaCopied per copy, and no more batch attempts', async () => {
    const t = copier({ batch: 'old-master' });
    t.c.start([copy(1), copy(2)]);
    await t.c.drain();
    t.c.start([copy(3)]);
    await t.c.drain();
    expect(t.singles).toEqual([
      { client_id: 'me', copy_id: 1, ok: true, failed_segments: [] },
      { client_id: 'me', copy_id: 2, ok: true, failed_segments: [] },
      { client_id: 'me', copy_id: 3, ok: true, failed_segments: [] },
    ]);
    expect(t.events.filter((e) => e === 'refused')).toEqual(['refused']); // asked once
  });
});
