// `store ls`, `store stat` and `store segments`: read-only views from the master's HTTP admin
// endpoints (docs/master.md), none of which takes a lease. ls streams /get_all_keys (any number of
// keys, constant memory; the regular expression is applied here, in JavaScript syntax), stat reads
// /query_key, segments /get_segments_detail.
import { UsageError } from '../cli-errors.js';
import { write, type CliContext } from '../context.js';
import { masterHttp } from '../endpoints.js';
import { getText, readBody, request, statusError, type HttpOptions } from '../http.js';
import { keyArg } from '../key-arg.js';
import { formatSize, jsonDoc, percent, table } from '../output.js';

function httpOpts(ctx: CliContext): HttpOptions {
  return { timeoutMs: ctx.inv.global.timeoutMs, peer: 'master' };
}

export async function ls(ctx: CliContext): Promise<void> {
  const pattern = ctx.inv.args[0];
  let re: RegExp | undefined;
  if (pattern !== undefined) {
    try {
      re = new RegExp(pattern);
    } catch (e) {
      throw new UsageError(`REGEX ${JSON.stringify(pattern)}: ${(e as Error).message}`);
    }
  }
  const url = `${await masterHttp(ctx.inv.global, ctx.env)}/get_all_keys`;
  const o = httpOpts(ctx);
  const res = await request(url, o);
  if (!res.ok || !res.body) throw statusError(res.status, await readBody(res, url, o), url, o);
  const json = ctx.inv.global.json;
  let count = 0;
  let pending = '';
  const emit = async (key: string): Promise<void> => {
    if (key === '' || (re && !re.test(key))) return;
    await write(ctx.stdout, json ? `${count === 0 ? '' : ','}\n  ${JSON.stringify(key)}` : key + '\n');
    count++;
  };
  if (json) await write(ctx.stdout, '{"keys": [');
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body) {
      pending += decoder.decode(chunk, { stream: true });
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) await emit(line);
    }
  } catch (e) {
    throw statusError(502, `the listing was cut short: ${(e as Error).message}`, url, o);
  }
  await emit(pending + decoder.decode());
  if (json) await write(ctx.stdout, `${count ? '\n' : ''}], "count": ${count}}\n`);
}

interface QueryReplica {
  transport_endpoint_: string;
  buffer_descriptors: { segment_name: string; size_: number | string; buffer_address_: number | string; transport_endpoint_: string }[];
}

export async function stat(ctx: CliContext): Promise<void> {
  const key = keyArg(ctx.inv.args[0]);
  const base = await masterHttp(ctx.inv.global, ctx.env);
  const body = await getText(`${base}/query_key?key=${encodeURIComponent(key)}`, httpOpts(ctx));
  const replicas = JSON.parse(body) as QueryReplica[];
  const rows = replicas.map((r, i) => ({
    replica: i + 1,
    endpoint: r.transport_endpoint_,
    slices: r.buffer_descriptors.map((b) => ({
      segment: b.segment_name,
      endpoint: b.transport_endpoint_,
      size: Number(b.size_),
      address: `0x${BigInt(b.buffer_address_).toString(16)}`,
    })),
  }));
  const size = rows.length ? rows[0].slices.reduce((n, s) => n + s.size, 0) : null;
  // The master shows no per-object lease or pin (neither /query_key nor an RPC): they are not printed.
  const doc = { key, size, state: rows.length ? 'complete' : 'being written', replicas: rows };
  if (ctx.inv.global.json) return write(ctx.stdout, jsonDoc(doc));
  const lines = [`key       ${key}`, `size      ${size === null ? '- (being written)' : `${formatSize(size)} (${size} bytes)`}`, `replicas  ${rows.length}`];
  let out = lines.join('\n') + '\n';
  if (rows.length) {
    out +=
      '\n' +
      table(
        ['REPLICA', 'SLICE', 'SEGMENT', 'ENDPOINT', 'SIZE', 'ADDRESS'],
        rows.flatMap((r) => r.slices.map((s, j) => [String(r.replica), String(j + 1), s.segment, s.endpoint, String(s.size), s.address])),
        [true, true, false, false, true, false],
      );
  }
  return write(ctx.stdout, out);
}

interface SegmentDetail {
  segment_name: string;
  segment_id: string;
  client_id: string;
  size_bytes: number;
  te_endpoint: string;
  protocol: string;
  status: string;
  allocator_used_bytes: number;
  allocator_capacity_bytes: number;
}

export async function segments(ctx: CliContext): Promise<void> {
  const base = await masterHttp(ctx.inv.global, ctx.env);
  const detail = JSON.parse(await getText(`${base}/get_segments_detail`, httpOpts(ctx))) as { segments: SegmentDetail[] };
  const segs = detail.segments.map((s) => ({
    name: s.segment_name,
    id: s.segment_id,
    client_id: s.client_id,
    size: s.size_bytes,
    used: s.allocator_used_bytes,
    capacity: s.allocator_capacity_bytes,
    endpoint: s.te_endpoint,
    protocol: s.protocol,
    state: s.status,
  }));
  if (ctx.inv.global.json) return write(ctx.stdout, jsonDoc({ segments: segs }));
  if (!segs.length) return write(ctx.stdout, 'no segments mounted\n');
  return write(
    ctx.stdout,
    table(
      ['NAME', 'SIZE', 'USED', 'USE', 'ENDPOINT', 'STATE'],
      segs.map((s) => [s.name, formatSize(s.size), formatSize(s.used), percent(s.used, s.capacity), s.endpoint, s.state]),
      [false, true, true, true, false, false],
    ),
  );
}
