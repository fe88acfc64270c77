// A restart's state (docs/master.md "Snapshots and the change log"): the newest snapshot that is
// whole (header, trailer, counts agreeing; an unreadable one is skipped for the one before), then
// every change log from that snapshot's index on, in order, each up to its first torn or corrupt
// frame (the tail a crash left half-written: ignored). Everything lands in a StateImage, which the
// master imports into its core. Without any snapshot, the logs alone (they then start from an
// empty state: the first snapshot of a directory is taken before its first log is written).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChangeRecord__Output } from '../../proto/gen/store/ChangeRecord.js';
import type { SnapshotFrame__Output } from '../../proto/gen/store/SnapshotFrame.js';
import { decodeWith, readFileFrames, stateCodec } from '../../common/state-proto.js';
import { logFileName } from './change-log.js';
import { StateImage } from './state-image.js';
import { listDir, snapshotFileName, type SnapshotCatalog } from './snapshot-store.js';
import { SNAPSHOT_FORMAT } from './snapshot-writer.js';

const frameCodec = stateCodec('SnapshotFrame');
const changeCodec = stateCodec('ChangeRecord');

export interface RestoreReport {
  image: StateImage;
  /** The snapshot used, or undefined (none whole). */
  snapshot: number | undefined;
  /** Snapshots skipped, with why. */
  skipped: string[];
  logs: number[];
  changes: number;
  /** Logs whose end was torn or corrupt: bytes ignored. */
  torn: { log: number; bytesIgnored: number }[];
  /** Where the catalog's list came from. */
  catalog: string;
}

/** Loads snapshot `index` into `image`; throws saying why it is not whole. */
function loadSnapshot(dir: string, index: number, image: StateImage, now: number): void {
  const { bodies, end } = readFileFrames(readFileSync(join(dir, snapshotFileName(index))));
  const frames = bodies.map((b) => decodeWith<SnapshotFrame__Output>(frameCodec, b));
  const header = frames[0]?.header;
  const trailer = frames[frames.length - 1]?.trailer;
  if (!header || header.format !== SNAPSHOT_FORMAT) throw new Error('no header of a known format');
  if (!trailer) throw new Error(`no trailer (whole frames end at byte ${end})`);
  const records = frames.slice(1, -1).map((f) => f.record);
  const segments = records.filter((r) => r?.mounted).length;
  const objects = records.filter((r) => r?.object).length;
  if (segments !== trailer.segments || objects !== trailer.objects)
    throw new Error(`the trailer counts ${trailer.segments} segments and ${trailer.objects} objects, the file holds ${segments} and ${objects}`);
  image.reset();
  for (const r of records) if (r) image.apply(r, now);
}

export async function restoreState(dir: string, catalog: SnapshotCatalog, now: number): Promise<RestoreReport> {
  const image = new StateImage();
  const files = listDir(dir);
  let listed = await catalog.list();
  let from = catalog.description;
  if (listed === undefined) {
    listed = files.snapshots;
    from = `${catalog.description} unreadable: the directory's own list`;
  }
  const present = new Set(files.snapshots);
  const skipped: string[] = [];
  let snapshot: number | undefined;
  for (const index of [...listed].reverse()) {
    if (!present.has(index)) {
      skipped.push(`${snapshotFileName(index)}: listed but missing`);
      continue;
    }
    try {
      loadSnapshot(dir, index, image, now);
      snapshot = index;
      break;
    } catch (e) {
      skipped.push(`${snapshotFileName(index)}: ${(e as Error).message}`);
      image.reset();
    }
  }
  const logs = files.logs.filter((l) => snapshot === undefined || l >= snapshot);
  let changes = 0;
  const torn: RestoreReport['torn'] = [];
  for (const l of logs) {
    const buf = readFileSync(join(dir, logFileName(l)));
    const { bodies, end } = readFileFrames(buf);
    if (end < buf.length) torn.push({ log: l, bytesIgnored: buf.length - end });
    for (const b of bodies) {
      let c: ChangeRecord__Output;
      try {
        c = decodeWith<ChangeRecord__Output>(changeCodec, b);
      } catch {
        break; // a frame whose CRC matched but whose message does not decode: stop like at a torn one
      }
      image.apply(c, now);
      changes++;
    }
  }
  return { image, snapshot, skipped, logs, changes, torn, catalog: from };
}
