// The master's index of the file tier (docs/tiers.md "File tier"): which objects have a complete
// file under <root_fs_dir>/<cluster_id> (key -> value size, slice checksums, file name), the bytes
// they hold against --global_file_segment_size, and the files expected from writes (Put or
// Upsert) whose memory write has ended (a writer reports its file with PutEnd replica_type DISK;
// only then is it part of the object). Pure data: the shell scans the directory into it at start
// (load) and deletes the files it names as doomed (takeDoomed), off the event loop. There is no
// eviction of files (spec): a file that would pass the budget is refused and deleted.
//
// Only the current value's file is ever indexed. A doomed file names the checksums of the value it
// holds (its header's): the shell deletes the file under that name only if it still is that value,
// so a doom never takes a newer value's file that replaced it by rename meanwhile (a stale
// writer's, an upsert's old value, a removed object's).
import { ErrorCode } from '../../common/error-code.js';
import { keyFileName } from '../../common/file-tier-name.js';

export interface FileEntry {
  /** The value's length (the file holds a header before it). */
  size: number;
  /** CRC-32C of each slice (unsigned), as in the file's header. */
  checksums: number[];
  /** The file's name in the tier's directory. */
  name: string;
}

/** A file expected from a Put whose memory write ended (the writer is still writing it). */
interface Expected {
  size: number;
  checksums: number[];
  since: number;
}

/**
 * A file to delete: the name, and the slice checksums its header must have for it to go (the
 * value it was doomed for); empty: whatever file has the name.
 */
export interface DoomedFile {
  name: string;
  checksums: readonly number[];
}

/** An expected file not reported within this long is no longer waited for (its writer died). */
export const EXPECTED_FILE_TIMEOUT_MS = 10 * 60 * 1000;
/** Expected files dropped per expire() call at most (a bounded step). */
const EXPIRE_BATCH = 1024;

export interface FileTierStats {
  fileBudgetBytes: number;
  fileUsedBytes: number;
  fileObjects: number;
  filesWritten: number;
  filesRefused: number;
  filesBad: number;
}

export class FileIndex {
  private readonly entries = new Map<string, FileEntry>();
  private readonly expected = new Map<string, Expected>();
  private doomed: DoomedFile[] = [];
  private used = 0;
  private written = 0;
  private refused = 0;
  /** Files found unreadable (a bad header, a torn value) by the rescan; the shell adds them. */
  bad = 0;
  /**
   * While true (the shell's rescan of the directory runs: a new HA leader), a key absent from the
   * index may still have a file: reads of such keys cannot be answered yet (read-path.ts).
   */
  scanning = false;
  /** Called when a file is doomed (the shell schedules its deletion). */
  onDoomed: (() => void) | undefined;

  /**
   * `root`: the tier's directory as clients reach it (<root_fs_dir>/<cluster_id>), '' when the
   * tier is off; `budget`: --global_file_segment_size.
   */
  constructor(
    readonly root: string,
    readonly budget: number,
  ) {}

  get enabled(): boolean {
    return this.root !== '';
  }

  get size(): number {
    return this.entries.size;
  }

  /** Whether a read of `key`, absent from memory and from the index, must wait for the rescan (scanning). */
  unknown(key: string): boolean {
    return this.scanning && !this.entries.has(key);
  }

  /** Whether `key` has a file or one is expected. */
  has(key: string): boolean {
    return this.entries.has(key) || this.expected.has(key);
  }

  get(key: string): FileEntry | undefined {
    return this.entries.get(key);
  }

  keys(): IterableIterator<string> {
    return this.entries.keys();
  }

  /** Every (key, entry), live: entries added during the iteration are visited, deleted ones skipped. */
  all(): IterableIterator<[string, FileEntry]> {
    return this.entries.entries();
  }

  /** A Put's memory write ended: its writer will report the file (size and checksums as recorded now). */
  expect(key: string, size: number, checksums: readonly number[], now: number): void {
    if (!this.enabled) return;
    this.expected.delete(key); // re-inserted: the map's order is the order of expiry
    this.expected.set(key, { size, checksums: [...checksums], since: now });
  }

  /**
   * An upsert of `key` started: its value is about to change. The old value's file leaves the
   * index (it is never served again) and is doomed as that value now, while the upsert's own file
   * cannot exist yet (its writer writes it after UpsertEnd; its rename would replace the old file
   * anyway). A writer that dies before reporting then leaves no file of the key: reads find the
   * object in memory or not at all, and a rescan after a restart finds no old value. The file of
   * an earlier write still expected is refused when reported after UpsertEnd (doomed then).
   */
  upsertStarted(key: string): void {
    const old = this.entries.get(key);
    if (old === undefined) return;
    this.entries.delete(key);
    this.used -= old.size;
    this.doom(old.name, old.checksums);
  }

  /**
   * The memory copy of `key` (with these checksums) left the core (evicted): its file stays in the
   * index only if it holds that value. A file of another value (indexed by a rescan after a crash
   * between an upsert and its file's report) is dropped and doomed as what it holds.
   */
  memoryGone(key: string, checksums: readonly number[]): void {
    const entry = this.entries.get(key);
    if (entry === undefined || checksums.length === 0 || sameChecksums(entry.checksums, checksums)) return;
    this.entries.delete(key);
    this.used -= entry.size;
    this.doom(entry.name, entry.checksums);
  }

  /**
   * A writer reports the file of `key` complete (PutEnd with replica_type DISK), with the slices'
   * checksums of its header. OK: it is in the index. Refused, the file doomed as the value it
   * holds: the object was removed meanwhile or was never put (OBJECT_NOT_FOUND), the budget has no
   * room (NO_AVAILABLE_HANDLE), or the checksums are not the current value's (INVALID_PARAMS: a
   * stale writer's file, of an earlier value of a key removed and put again or upserted; the
   * current value's file may still come, and is not deleted: its checksums differ).
   */
  complete(key: string, checksums: readonly number[]): number {
    if (!this.enabled) return ErrorCode.INVALID_PARAMS;
    const sums = checksums.map((c) => c >>> 0);
    const exp = this.expected.get(key);
    if (exp === undefined) {
      const entry = this.entries.get(key);
      if (entry !== undefined && sameChecksums(entry.checksums, sums)) return ErrorCode.OK; // reported twice
      this.doom(keyFileName(key), sums);
      this.refused++;
      return entry === undefined ? ErrorCode.OBJECT_NOT_FOUND : ErrorCode.INVALID_PARAMS;
    }
    if (exp.checksums.length !== 0 && !sameChecksums(exp.checksums, sums)) {
      // A stale writer's file: if its rename came last, the name holds it now (gone once deleted:
      // readers find no file; if the current value's came last, it stays and is read as indexed).
      this.doom(keyFileName(key), sums);
      this.refused++;
      return ErrorCode.INVALID_PARAMS;
    }
    this.expected.delete(key);
    const old = this.entries.get(key);
    const after = this.used - (old?.size ?? 0) + exp.size;
    if (after > this.budget) {
      if (old !== undefined) {
        this.entries.delete(key);
        this.used -= old.size;
      }
      this.doom(keyFileName(key), sums);
      this.refused++;
      return ErrorCode.NO_AVAILABLE_HANDLE;
    }
    this.entries.set(key, { size: exp.size, checksums: sums, name: keyFileName(key) });
    this.used = after;
    this.written++;
    return ErrorCode.OK;
  }

  /**
   * A file found by the rescan (its header read and checked). A file over the budget is still
   * indexed (it was accepted once, perhaps under a larger budget): nothing is deleted at start.
   */
  load(key: string, entry: FileEntry): void {
    const old = this.entries.get(key);
    if (old !== undefined) this.used -= old.size;
    this.entries.set(key, entry);
    this.used += entry.size;
  }

  /**
   * Removes `key` from the tier: its entry and its expected file, and dooms the files they name
   * (as the values they hold). Whether it had an entry.
   */
  remove(key: string): boolean {
    if (!this.enabled) return false;
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.used -= old.size;
      this.doom(old.name, old.checksums);
    }
    const exp = this.expected.get(key);
    if (exp !== undefined) {
      this.expected.delete(key);
      if (old === undefined || !sameChecksums(old.checksums, exp.checksums)) this.doom(keyFileName(key), exp.checksums);
    }
    return old !== undefined;
  }

  /** Drops expected files not reported within EXPECTED_FILE_TIMEOUT_MS (oldest first, bounded). */
  expire(now: number): number {
    let n = 0;
    for (const [key, e] of this.expected) {
      if (now - e.since < EXPECTED_FILE_TIMEOUT_MS || n >= EXPIRE_BATCH) break;
      this.expected.delete(key);
      n++;
    }
    return n;
  }

  /** The files to delete, once each. */
  takeDoomed(): DoomedFile[] {
    const d = this.doomed;
    this.doomed = [];
    return d;
  }

  stats(): FileTierStats {
    return {
      fileBudgetBytes: this.enabled ? this.budget : 0,
      fileUsedBytes: this.used,
      fileObjects: this.entries.size,
      filesWritten: this.written,
      filesRefused: this.refused,
      filesBad: this.bad,
    };
  }

  private doom(name: string, checksums: readonly number[]): void {
    this.doomed.push({ name, checksums });
    this.onDoomed?.();
  }
}

function sameChecksums(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((c, i) => c >>> 0 === b[i] >>> 0);
}
