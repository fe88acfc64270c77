// `store put`, `store get` and `store rm`: values through an embedded pure client, removal through
// the master. A FILE is read straight into a registered lease of the value's size (one copy of the
// value in memory, no staging copy); stdin is read whole first (its size is unknown until it ends),
// then copied into the lease. A Get reads into a registered lease, then writes it out. Limit: a
// value is one Buffer, so at most buffer.constants.MAX_LENGTH (4 GiB on Node 20) less one byte,
// and it is held in memory whole (the client has no ranged or streamed Put/Get).
import { constants as bufferConstants } from 'node:buffer';
import { open, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { Client } from '../../client/client.js';
import { StoreError } from '../../client/errors.js';
import { ErrorCode } from '../../common/error-code.js';
import type { BufferLease } from '../../client/buffer-pool.js';
import { intArg } from '../args.js';
import { CliError, ExitCode, LocalIoError, UsageError } from '../cli-errors.js';
import { write, type CliContext } from '../context.js';
import { resolveMaster } from '../endpoints.js';
import { cliSecret } from '../secret-option.js';
import { connectMaster } from '../master-rpc.js';
import { keyArg } from '../key-arg.js';
import { jsonDoc, formatSize } from '../output.js';
import { Progress, PROGRESS_MIN_BYTES } from '../progress.js';

/** Largest value: one Buffer. */
export const MAX_VALUE_BYTES = bufferConstants.MAX_LENGTH - 1;
const IO_CHUNK = 8 * 1024 * 1024;
/** How often `rm` asks again while a read lease holds the object. */
const LEASE_POLL_MS = 100;

function ioError(what: string, e: unknown): LocalIoError {
  const err = e as NodeJS.ErrnoException;
  return new LocalIoError(`${what}: ${err.code ? `${err.code} ` : ''}${err.message.replace(/^[A-Z]+: /, '')}`, { cause: e });
}

function checkSize(size: number, what: string): void {
  if (size === 0) throw new UsageError(`${what} is empty: the store keeps no empty values`);
  if (size > MAX_VALUE_BYTES) throw new UsageError(`${what} is ${size} bytes (${formatSize(size)}): a value is at most ${MAX_VALUE_BYTES} bytes (one Buffer)`);
}

/** Reads a stream whole (stdin), with its total so far on the progress line. */
async function readAll(input: Readable, progress: Progress): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const c of input) {
      const b = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
      chunks.push(b);
      total += b.length;
      if (total > MAX_VALUE_BYTES) throw new UsageError(`stdin holds more than ${MAX_VALUE_BYTES} bytes: a value is at most that (one Buffer)`);
      if (total >= PROGRESS_MIN_BYTES) progress.update(total, 0); // size unknown until the end
    }
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw ioError('reading stdin', e);
  }
  return chunks;
}

/** Reads `size` bytes of `fh` into `target` in chunks; a file that shrank meanwhile is an error. */
async function readInto(fh: FileHandle, target: Buffer, size: number, path: string, progress: Progress): Promise<void> {
  progress.start('reading', size);
  let off = 0;
  while (off < size) {
    let n: number;
    try {
      ({ bytesRead: n } = await fh.read(target, off, Math.min(IO_CHUNK, size - off), off));
    } catch (e) {
      throw ioError(`reading ${path}`, e);
    }
    if (n === 0) throw new LocalIoError(`reading ${path}: the file ended at ${off} of ${size} bytes (it changed while being read)`);
    off += n;
    progress.update(off, size);
  }
}

export async function put(ctx: CliContext): Promise<void> {
  const { inv } = ctx;
  const key = keyArg(inv.args[0]);
  const src = inv.args[1];
  const o = inv.options;
  const replicas = o.replicas === undefined ? 1 : intArg('--replicas', o.replicas as string, 1, 64);
  const config = {
    replica_num: replicas,
    with_soft_pin: o['soft-pin'] === true,
    with_hard_pin: o['hard-pin'] === true,
    preferred_segment: (o.segment as string | undefined) ?? '',
  };

  let fh: FileHandle | undefined;
  let chunks: Buffer[] | undefined;
  let size: number;
  const progress = new Progress(ctx.stderr, !inv.global.quiet);
  try {
    if (src === '-') {
      progress.start('reading', 0);
      chunks = await readAll(ctx.stdin, progress);
      progress.done();
      size = chunks.reduce((n, c) => n + c.length, 0);
      checkSize(size, 'stdin');
    } else {
      try {
        fh = await open(src, 'r');
        const st = await fh.stat();
        if (!st.isFile()) {
          // a pipe or a device: read as a stream
          progress.start('reading', 0);
          chunks = await readAll(fh.createReadStream({ autoClose: false }), progress);
          progress.done();
          size = chunks.reduce((n, c) => n + c.length, 0);
        } else size = st.size;
      } catch (e) {
        if (e instanceof CliError) throw e;
        throw ioError(`cannot read ${src}`, e);
      }
      checkSize(size, src);
    }
    const bar = new Progress(ctx.stderr, !inv.global.quiet && size >= PROGRESS_MIN_BYTES);
    const { openClient } = await import('../embedded-client.js'); // the client and its addon: put/get only
    const client = await openClient(ctx, size);
    let lease: BufferLease | undefined;
    try {
      lease = await client.allocBuffer(size, inv.global.timeoutMs);
      const target = lease.buffer.subarray(0, size);
      if (chunks) {
        let off = 0;
        for (let i = 0; i < chunks.length; i++) {
          chunks[i].copy(target, off);
          off += chunks[i].length;
          chunks[i] = Buffer.alloc(0); // let it go as soon as it is copied
        }
      } else await readInto(fh!, target, size, src, bar);
      bar.start('storing', size);
      await (o.upsert === true ? client.upsert(key, target, config) : client.put(key, target, config));
      bar.update(size, size);
    } finally {
      bar.done();
      lease?.release();
      await client.close();
    }
    await write(ctx.stdout, inv.global.json ? jsonDoc({ key, size, replicas, upsert: o.upsert === true }) : '');
  } finally {
    progress.done();
    await fh?.close();
  }
}

/** Writes `data` to `out` (a file or stdout) in chunks, with progress. */
async function writeOut(ctx: CliContext, dest: string, data: Buffer, bar: Progress): Promise<void> {
  bar.start('writing', data.length);
  if (dest === '-') {
    try {
      for (let off = 0; off < data.length; off += IO_CHUNK) {
        await write(ctx.stdout, data.subarray(off, Math.min(off + IO_CHUNK, data.length)));
        bar.update(Math.min(off + IO_CHUNK, data.length), data.length);
      }
    } catch (e) {
      throw ioError('writing stdout', e);
    }
    return;
  }
  let fh: FileHandle;
  try {
    fh = await open(dest, 'w');
  } catch (e) {
    throw ioError(`cannot write ${dest}`, e);
  }
  try {
    for (let off = 0; off < data.length;) {
      const { bytesWritten } = await fh.write(data, off, Math.min(IO_CHUNK, data.length - off));
      off += bytesWritten;
      bar.update(off, data.length);
    }
  } catch (e) {
    throw ioError(`writing ${dest}`, e);
  } finally {
    await fh.close();
  }
}

export async function get(ctx: CliContext): Promise<void> {
  const { inv } = ctx;
  const key = keyArg(inv.args[0]);
  const dest = inv.args[1] ?? '-';
  if (dest === '-' && inv.global.json) throw new UsageError('--json prints its document on stdout: give a FILE for the value (store get KEY FILE --json)');
  let client: Client | undefined;
  let lease: BufferLease | undefined;
  try {
    // The size first, from the master: the client's local buffer is then sized for the value, so
    // the engine reads straight into it (a lease of an overflow region would be staged: 2x memory).
    const size = await valueSize(ctx, key);
    const { openClient } = await import('../embedded-client.js');
    client = await openClient(ctx, size);
    const progress = new Progress(ctx.stderr, !inv.global.quiet && size >= PROGRESS_MIN_BYTES);
    if (size > MAX_VALUE_BYTES) throw new CliError(ExitCode.STORE_ERROR, `${key} is ${size} bytes: this CLI reads values up to ${MAX_VALUE_BYTES} bytes (one Buffer)`);
    lease = await client.allocBuffer(size, inv.global.timeoutMs);
    progress.start('fetching', size);
    const n = await client.getInto(key, lease.buffer);
    progress.update(n, n);
    try {
      await writeOut(ctx, dest, lease.buffer.subarray(0, n), progress);
    } finally {
      progress.done();
    }
    if (inv.global.json) await write(ctx.stdout, jsonDoc({ key, size: n, file: dest }));
  } finally {
    lease?.release();
    await client?.close();
  }
}

export async function rm(ctx: CliContext): Promise<void> {
  const { inv } = ctx;
  const key = keyArg(inv.args[0]);
  const force = inv.options.force === true;
  const leader = await resolveMaster(inv.global, ctx.env);
  const master = await connectMaster(leader, inv.global.timeoutMs, cliSecret(ctx));
  try {
    // A read lease (a Get moments ago, up to the master's --default_kv_lease_ttl) refuses removal
    // until it ends: wait for it within --timeout rather than fail a removal that will succeed.
    const deadline = performance.now() + inv.global.timeoutMs;
    for (;;) {
      const r = await master.remove({ key, force });
      if (r.status_code === ErrorCode.OK) break;
      if (r.status_code !== ErrorCode.OBJECT_HAS_LEASE || performance.now() + LEASE_POLL_MS > deadline) {
        throw StoreError.fromCode(
          r.status_code,
          `remove ${JSON.stringify(key)}${r.status_code === ErrorCode.OBJECT_HAS_LEASE ? ` (still leased after ${inv.global.timeoutMs} ms)` : ''}`,
        );
      }
      await new Promise((res) => setTimeout(res, LEASE_POLL_MS));
    }
  } finally {
    master.close();
  }
  await write(ctx.stdout, inv.global.json ? jsonDoc({ key, removed: true }) : '');
}

/** The size of KEY's value (its first complete replica), from the master's GetReplicaList. */
async function valueSize(ctx: CliContext, key: string): Promise<number> {
  const master = await connectMaster(await resolveMaster(ctx.inv.global, ctx.env), ctx.inv.global.timeoutMs, cliSecret(ctx));
  try {
    const r = await master.getReplicaList({ key });
    if (r.status_code !== ErrorCode.OK) throw StoreError.fromCode(r.status_code, `get ${JSON.stringify(key)}`);
    const replica = r.replica_list.find((x) => x.handles.length > 0);
    if (!replica) throw StoreError.fromCode(ErrorCode.REPLICA_IS_NOT_READY, `get ${JSON.stringify(key)}`);
    return replica.handles.reduce((n, h) => n + Number(h.size), 0);
  } finally {
    master.close();
  }
}
