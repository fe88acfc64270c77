// One dummy client's connection to the real client: the shared regions it registered (files in
// the shared directory, mapped here once and attached to the real client's transfer engine) and
// the data calls in flight on each. A span (region, offset, length) becomes a Buffer over the
// mapping after a bounds check. When the connection ends, every region is detached and unmapped
// once the calls using it have finished; the files belong to the dummy client and stay.
import { join } from 'node:path';
import { ErrorCode } from '../common/error-code.js';
import { InvalidParamsError, StoreError } from '../client/errors.js';
import type { MappedRegion, MapMemoryOptions } from '../client/native-port.js';

/** Region files must carry this prefix: a dummy client cannot make us map any other file. */
export const REGION_FILE_PREFIX = 'kvstore-region-';
/** Regions one connection may hold at once. */
export const MAX_REGIONS_PER_SESSION = 1024;

export interface SessionHost {
  shmDir: string;
  /** Deletes a region file of a connection that ended if its dummy client died (orphan-regions.ts). */
  removeIfOrphaned?(path: string): void;
  mapMemory(opts: MapMemoryOptions): MappedRegion;
  attachRegion(region: MappedRegion): void;
  detachRegion(region: MappedRegion): Promise<void>;
}

interface SessionRegion {
  readonly id: number;
  readonly name: string;
  readonly mapped: MappedRegion;
  /** Data calls using it now; it is unmapped only at zero. */
  users: number;
  /** Set by unregister/close: no new call may use it; the last user triggers the release. */
  closing: boolean;
  released?: Promise<void>;
  onIdle?: () => void;
}

export interface SpanRequest {
  region_id: number;
  offset: number;
  length: number;
}

export class DummySession {
  private readonly regions = new Map<number, SessionRegion>();
  private nextId = 1;
  private closed = false;
  /** The name the dummy client gave in Hello (for logs). */
  clientName = '';
  /**
   * The dummy client asked (Hello local_reads) to be told where the bytes it reads lie, and is on
   * this host (the Unix socket): read replies carry LocalReplica (client/local-replica.ts).
   */
  localReads = false;

  constructor(
    private readonly host: SessionHost,
    /** For logs: who is on the other end. */
    readonly peer: string,
    /** False for gRPC calls: they have no connection whose end would release a region. */
    private readonly regionsAllowed = true,
    /** A connection on the Unix socket: the dummy client shares this host (and network namespace). */
    readonly sameHost = false,
  ) {}

  /** Who this is, for logs: the Hello name and the connection. */
  get label(): string {
    return this.clientName ? `"${this.clientName}" (${this.peer})` : this.peer;
  }

  get regionCount(): number {
    return this.regions.size;
  }

  get regionBytes(): number {
    let n = 0;
    for (const r of this.regions.values()) n += r.mapped.size;
    return n;
  }

  /** Maps `name` (a file in the shared directory) and attaches it; returns its region id. */
  register(name: string, size: number, offset: number): number {
    if (this.closed) throw new StoreError(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, 'the session is closed');
    if (!this.regionsAllowed) {
      throw new StoreError(
        ErrorCode.NOT_IMPLEMENTED,
        'shared regions need the KVD1 channel (a Unix socket or TCP connection whose end releases them); over gRPC use the inline forms (Put, Get)',
      );
    }
    if (typeof name !== 'string' || !name.startsWith(REGION_FILE_PREFIX) || name.length > 255 || /[/\\\0]/.test(name) || name.includes('..')) {
      throw new InvalidParamsError(`region name ${JSON.stringify(name)} must be a plain file name starting with ${REGION_FILE_PREFIX}`);
    }
    if (!Number.isSafeInteger(size) || size <= 0) throw new InvalidParamsError(`region size must be a positive integer, got ${size}`);
    if (!Number.isSafeInteger(offset) || offset < 0 || offset % 4096 !== 0) {
      throw new InvalidParamsError(`region offset must be a non-negative multiple of 4096, got ${offset}`);
    }
    if (this.regions.size >= MAX_REGIONS_PER_SESSION) {
      throw new StoreError(ErrorCode.BUFFER_EXHAUSTED, `a connection may hold at most ${MAX_REGIONS_PER_SESSION} regions`);
    }
    const path = join(this.host.shmDir, name);
    let mapped: MappedRegion;
    try {
      mapped = this.host.mapMemory({ kind: 'file', path, size, offset, create: false });
    } catch (e) {
      const code = (e as { code?: string }).code;
      const why = code === 'NOT_FOUND' ? `no file ${path} (is the dummy client's shared directory the same as this store service's --shm_dir?)` : (e as Error).message;
      throw new StoreError(code === 'NOT_FOUND' ? ErrorCode.INVALID_PARAMS : ErrorCode.INTERNAL_ERROR, `cannot map region ${name}: ${why}`, { cause: e });
    }
    try {
      this.host.attachRegion(mapped);
    } catch (e) {
      mapped.release();
      throw e;
    }
    const id = this.nextId++;
    this.regions.set(id, { id, name, mapped, users: 0, closing: false });
    return id;
  }

  /** Detaches and unmaps a region once its calls in flight are done. */
  async unregister(id: number): Promise<void> {
    const r = this.regions.get(id);
    if (!r) throw new InvalidParamsError(`unknown region id ${id}`);
    await this.release(r);
  }

  /**
   * Buffers over the spans of one call, marking their regions in use until `done` is called.
   * Throws InvalidParamsError for an unknown region or a span outside it (nothing is marked then);
   * `what` names the call in that error (a function: built only then).
   */
  use(spans: readonly SpanRequest[], what: string | (() => string)): { views: Buffer[]; done: () => void } {
    const used: SessionRegion[] = [];
    const views: Buffer[] = [];
    for (const s of spans) {
      const r = this.regions.get(s.region_id);
      if (!r || r.closing) throw new InvalidParamsError(`${named(what)}: unknown region id ${s.region_id}`);
      const offset = Number(s.offset);
      const length = Number(s.length);
      if (!(length > 0) || offset < 0 || offset + length > r.mapped.size) {
        throw new InvalidParamsError(`${named(what)}: span [${offset}, +${length}) lies outside region ${s.region_id} (${r.mapped.size} bytes)`);
      }
      views.push(r.mapped.view(offset, length));
      used.push(r);
    }
    for (const r of used) r.users++;
    let finished = false;
    return {
      views,
      done: () => {
        if (finished) return;
        finished = true;
        for (const r of used) if (--r.users === 0) r.onIdle?.();
      },
    };
  }

  /** The connection ended: every region goes once its calls finish. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.regions.values()].map((r) => this.release(r)));
  }

  private release(r: SessionRegion): Promise<void> {
    if (r.released) return r.released;
    r.closing = true;
    const idle = r.users === 0 ? Promise.resolve() : new Promise<void>((resolve) => (r.onIdle = resolve));
    r.released = idle
      .then(() => this.host.detachRegion(r.mapped))
      .finally(() => {
        r.mapped.release();
        this.regions.delete(r.id);
        // The file is the dummy client's: gone already if it closed; left behind if it died (then
        // nobody holds its lock any more, and it is deleted here).
        if (this.closed) this.host.removeIfOrphaned?.(join(this.host.shmDir, r.name));
      });
    return r.released;
  }
}

function named(what: string | (() => string)): string {
  return typeof what === 'string' ? what : what();
}
