// Writes one snapshot of a core's state (docs/master.md "Snapshots and the change log"): a header
// (the change log index the snapshot starts, the view version), every segment, then the complete
// objects in the core's bounded steps (state-export.ts) with a turn of the event loop between
// steps, so RPCs are served meanwhile and their changes go to the new change log; a trailer with
// the counts. Written to a temporary file, fsynced, renamed, and the directory fsynced: a snapshot
// file either is whole or does not exist under its name (snapshot-store.ts).
import { closeSync, fsyncSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { encodeWith, fileFrame, stateCodec } from '../../common/state-proto.js';
import type { ObjectRecord, SegmentRecord } from '../core/state-records.js';
import { publish, snapshotFileName } from './snapshot-store.js';

const frameCodec = stateCodec('SnapshotFrame');

export const SNAPSHOT_FORMAT = 1;

/** What a snapshot is taken of (MasterCore's state export). */
export interface SnapshotSource {
  exportSegments(): SegmentRecord[];
  exportObjectSteps(now: number): Generator<ObjectRecord[], void, number>;
}

export interface SnapshotResult {
  index: number;
  segments: number;
  objects: number;
  bytes: number;
  ms: number;
}

export class SnapshotTimeout extends Error {
  constructor(ms: number) {
    super(`the snapshot did not finish within ${ms} ms (--snapshot_child_timeout_seconds); abandoned`);
    this.name = 'SnapshotTimeout';
  }
}

/**
 * Writes snapshot `index` of `source` into `dir`. `stepped`: a turn of the event loop between
 * the core's steps (a running master); else all at once (startup). Gives up past `timeoutMs`.
 */
export async function writeSnapshot(
  dir: string,
  index: number,
  source: SnapshotSource,
  clock: () => number,
  opts: { stepped: boolean; timeoutMs: number; viewVersion: number },
): Promise<SnapshotResult> {
  const start = clock();
  const tmp = `${snapshotFileName(index)}.tmp`;
  const fd = openSync(join(dir, tmp), 'w');
  let bytes = 0;
  let done = false;
  const write = (frame: object): void => {
    const b = fileFrame(encodeWith(frameCodec, frame));
    writeSync(fd, b);
    bytes += b.length;
  };
  try {
    write({ header: { format: SNAPSHOT_FORMAT, created_unix_ms: Date.now(), log_index: index, view_version: opts.viewVersion } });
    const segments = source.exportSegments();
    for (const s of segments) write({ record: { mounted: s } });
    let objects = 0;
    const steps = source.exportObjectSteps(clock());
    for (let r = steps.next(clock()); !r.done;) {
      let batch: Buffer[] = [];
      for (const rec of r.value) batch.push(fileFrame(encodeWith(frameCodec, { record: { object: rec } })));
      objects += r.value.length;
      const data = Buffer.concat(batch);
      batch = [];
      writeSync(fd, data);
      bytes += data.length;
      if (opts.stepped) await nextTurn();
      if (clock() - start > opts.timeoutMs) {
        steps.return(undefined);
        throw new SnapshotTimeout(opts.timeoutMs);
      }
      r = steps.next(clock());
    }
    write({ trailer: { segments: segments.length, objects } });
    fsyncSync(fd);
    closeSync(fd);
    done = true;
    publish(dir, tmp, snapshotFileName(index));
    return { index, segments: segments.length, objects, bytes, ms: clock() - start };
  } finally {
    if (!done) {
      closeSync(fd);
      rmSync(join(dir, tmp), { force: true });
    }
  }
}
