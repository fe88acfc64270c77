// HTTP management endpoints of the master (spec section B) on --metrics_port: /metrics,
// /metrics/summary, /query_key, /batch_query_keys, /get_all_keys, /get_all_segments,
// /query_segment, /get_segments_detail, /health. All GET; a missing parameter is a 400 with a
// one-line reason, an unknown key or segment a 404. Whole-table answers are written in bounded
// steps, or paged, by http-listing.ts.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { formatSize } from '../common/size.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import type { MasterCorePort } from './core-port.js';
import type { MasterMetrics } from './master-metrics.js';
import { MALFORMED_TARGET, requestUrl } from '../common/request-url.js';
import { collectPage, pageParams, streamItems } from './http-listing.js';

const PROM = 'text/plain; version=0.0.4';
const TEXT = 'text/plain; charset=utf-8';
const JSON_TYPE = 'application/json; charset=utf-8';

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function bufferDescriptor(h: ReplicaInfo__Output['handles'][number]): object {
  return { segment_name: h.segment_name, size_: h.size, buffer_address_: h.buffer, transport_endpoint_: h.te_endpoint };
}

/** Memory replicas of an object as descriptors: endpoint of the first slice, every slice's buffer. */
export function replicaDescriptors(replicas: ReplicaInfo__Output[]): Array<{ transport_endpoint_: string; buffer_descriptors: object[] }> {
  return replicas.filter((r) => r.handles.length > 0).map((r) => ({ transport_endpoint_: r.handles[0].te_endpoint, buffer_descriptors: r.handles.map(bufferDescriptor) }));
}

export interface AdminDeps {
  core: MasterCorePort;
  metrics: MasterMetrics;
  now: () => number;
  /** Extra lines for /metrics/summary (uptime, connections). */
  info: () => Record<string, string | number>;
}

export function createAdminServer(deps: AdminDeps): Server {
  return createServer((req, res) => {
    handle(deps, req, res).catch((e: Error) => {
      // a listing that fails half-way has sent its status already: cut the body short
      if (res.headersSent) res.destroy(e);
      else send(res, 500, TEXT, `internal error: ${e.message}\n`);
    });
  });
}

async function handle(d: AdminDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = requestUrl(req);
  if (url === null) return send(res, 400, TEXT, MALFORMED_TARGET);
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    return send(res, 405, TEXT, `method ${req.method} not allowed: management endpoints are GET only\n`);
  }
  const param = (name: string): string | undefined => {
    const v = url.searchParams.get(name);
    if (v === null || v === '') {
      send(res, 400, TEXT, `missing query parameter "${name}" (${url.pathname}?${name}=...)\n`);
      return undefined;
    }
    return v;
  };
  switch (url.pathname) {
    case '/health':
      return send(res, 200, TEXT, 'OK');
    case '/metrics':
      return send(res, 200, PROM, await d.metrics.metrics());
    case '/metrics/summary':
      return send(res, 200, PROM, await summary(d));
    case '/query_key': {
      const key = param('key');
      if (key === undefined) return;
      const replicas = d.core.queryKey(key);
      if (!replicas) return send(res, 404, TEXT, `key not found: ${key}\n`);
      return send(res, 200, PROM, JSON.stringify(replicaDescriptors(replicas)));
    }
    case '/batch_query_keys': {
      // keys=a,b (the spec's form) and/or key=K repeated, each one whole key (commas allowed)
      const list = url.searchParams.get('keys');
      const single = url.searchParams.getAll('key');
      if ((list === null || list === '') && single.length === 0) {
        return send(res, 400, TEXT, `missing query parameter "keys" (/batch_query_keys?keys=a,b or ?key=a&key=b)\n`);
      }
      const keys = [...(list ?? '').split(',').filter((k) => k !== ''), ...single.filter((k) => k !== '')];
      const data: Record<string, object> = {};
      for (const key of keys) {
        const replicas = d.core.queryKey(key);
        if (!replicas) data[key] = { ok: false, error: 'OBJECT_NOT_FOUND: key not found' };
        else {
          const values = replicaDescriptors(replicas).flatMap((r) => r.buffer_descriptors.map((b) => ({ transport_endpoint_: r.transport_endpoint_, buffer_descriptor: b })));
          data[key] = { ok: true, values };
        }
      }
      return send(res, 200, JSON_TYPE, JSON.stringify({ success: keys.length > 0, data }));
    }
    case '/get_all_keys':
      return listLines(res, url.searchParams, d.core.allKeys());
    case '/get_all_segments':
      return listLines(res, url.searchParams, d.core.segmentNames());
    case '/query_segment': {
      const name = param('segment');
      if (name === undefined) return;
      const s = d.core.querySegment(name);
      if (!s) return send(res, 404, TEXT, `segment not found: ${name}\n`);
      return send(res, 200, TEXT, `${name}\nUsed(bytes): ${s.used}\nCapacity(bytes): ${s.capacity}\n`);
    }
    case '/get_segments_detail': {
      const segments = d.core.segmentsDetail().map((s) => ({
        segment_name: s.segment_name,
        segment_id: s.segment_id,
        client_id: s.client_id,
        base_address: '0x' + s.base_address.toString(16),
        size_bytes: s.size_bytes,
        size_human: formatSize(s.size_bytes),
        te_endpoint: s.te_endpoint,
        protocol: s.protocol,
        status: s.status,
        allocator_used_bytes: s.allocator_used_bytes,
        allocator_capacity_bytes: s.allocator_capacity_bytes,
        allocator_usage_percent: s.allocator_capacity_bytes > 0 ? Math.round((s.allocator_used_bytes / s.allocator_capacity_bytes) * 10000) / 100 : 0,
      }));
      res.writeHead(200, { 'Content-Type': JSON_TYPE });
      return streamItems(res, segments, (seg) => JSON.stringify(seg), { head: `{"total_segments":${segments.length},"segments":[`, separator: ',', tail: () => ']}' });
    }
    default:
      return send(res, 404, TEXT, `no such endpoint: ${url.pathname}\n`);
  }
}

/**
 * A listing with one item per line (keys and segment names cannot hold a line break, see
 * common/key-rules.ts): all of it, streamed; or with ?limit=N&after=ITEM the page of the N
 * smallest items after ITEM, in order, with `X-Has-More: true` when items follow it.
 */
async function listLines(res: ServerResponse, params: URLSearchParams, items: Iterable<string>): Promise<void> {
  const p = pageParams(params);
  if ('error' in p) return send(res, 400, TEXT, `${p.error}\n`);
  if (!p.page) {
    res.writeHead(200, { 'Content-Type': TEXT });
    return streamItems(res, items, (item) => item + '\n');
  }
  const page = await collectPage(res, items, p.after, p.limit);
  if (page === undefined) return;
  const body = page.items.length ? page.items.join('\n') + '\n' : '';
  res.writeHead(200, { 'Content-Type': TEXT, 'Content-Length': Buffer.byteLength(body), 'X-Has-More': String(page.more) });
  res.end(body);
}

/** The human-readable /metrics/summary text, also the source of the periodic log line. */
export async function summary(d: AdminDeps): Promise<string> {
  const s = d.core.stats(d.now());
  const t = await d.metrics.totals();
  const lines = [
    'store_master summary',
    ...Object.entries(d.info()).map(([k, v]) => `${k}: ${v}`),
    `segments: ${s.segments}`,
    `clients: ${s.clients}`,
    `capacity: ${formatSize(s.capacityBytes)} (${s.capacityBytes} bytes)`,
    `used: ${formatSize(s.usedBytes)} (${s.usedBytes} bytes, ${s.capacityBytes ? ((100 * s.usedBytes) / s.capacityBytes).toFixed(1) : '0.0'}%)`,
    `objects: ${s.objects} (active leases ${s.activeLeases}, soft pinned ${s.softPinned}, hard pinned ${s.hardPinned})`,
    `evictions: ${s.evictionsTotal}`,
    ...(s.diskCapacityBytes > 0 || s.offloadsDone > 0
      ? [
          `ssd tier: ${formatSize(s.diskUsedBytes)} of ${formatSize(s.diskCapacityBytes)} used (${s.diskUsedBytes} bytes, quota ${s.diskQuotaBytes} bytes), ${s.diskEvictions} disk evictions`,
          `offload: ${s.offloadsQueued} queued, ${s.offloadsInFlight} in flight, ${s.offloadsDone} done, ${s.offloadsFailed} failed, ${s.offloadsDropped} dropped (queue full), ${s.offloadsSkippedFull} skipped (disk full), ${s.offloadsRequeued} queued again (DISK replica lost), ${s.forcedEvictions} evicted without a copy`,
          `promotion: ${s.promotionsQueued} queued, ${s.promotionsInFlight} in flight, ${s.promotionsDone} done, ${s.promotionsFailed} failed`,
        ]
      : []),
    `re-replication: ${s.underReplicated} objects short, ${s.copiesInFlight} copies in flight, ${s.copied} copied, ${s.failed} failed, ${s.abandoned} given up`,
    `file tier: ${formatSize(s.fileUsedBytes)} / ${formatSize(s.fileBudgetBytes)} (${s.fileObjects} objects; files written ${s.filesWritten}, refused ${s.filesRefused}, bad ${s.filesBad})`,
    `rpc requests: ${t.requests}, errors: ${t.errors}`,
  ];
  for (const m of await d.metrics.perMethod()) lines.push(`  ${m.method}: ${m.requests} requests, mean ${m.meanMs.toFixed(3)} ms`);
  return lines.join('\n') + '\n';
}
