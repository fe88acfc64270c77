// Read-only views of the core, none of which grants a lease: the totals (/metrics), the listings
// of segments, keys and an object's replicas (the management HTTP endpoints), BatchQueryIp, the
// eviction order, and a cross-check of the derived structures for tests.
import type { TaskStats } from './task-manager.js';
import { ErrorCode } from '../../common/error-code.js';
import { splitHostPort } from '../../common/host-port.js';
import type { BatchQueryIpRequest__Output } from '../../proto/gen/store/BatchQueryIpRequest.js';
import type { BatchQueryIpResponse__Output } from '../../proto/gen/store/BatchQueryIpResponse.js';
import type { IPAddressList__Output } from '../../proto/gen/store/IPAddressList.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import type { CoreShared } from './core-shared.js';
import type { MasterStats, SegmentDetail } from './master-core-config.js';
import { FLAG_AWAITING_COPY, FLAG_HARD_PIN, FLAG_SOFT_PIN } from './object-meta.js';
import { replicaList } from './replica-capture.js';
import { fileReplicaReply } from './file-replica.js';
import { servedView } from './served-view.js';

/** Host part of `host:port` (IPv6 in brackets allowed); anything else as it is. */
const hostOf = (endpoint: string): string => splitHostPort(endpoint)?.host ?? endpoint;

export class Diagnostics {
  constructor(private readonly s: CoreShared) {}

  /**
   * Totals, O(segments). softPinned counts objects written with a soft pin (each pin lapses after
   * the soft-pin TTL without access and returns with the next access; eviction honours that).
   */
  stats(now: number): Omit<MasterStats, keyof TaskStats> {
    const s = this.s;
    let capacityBytes = 0;
    let usedBytes = 0;
    for (const seg of s.segments.all()) {
      if (seg.disk) continue; // the SSD tier's are in disk*Bytes
      capacityBytes += seg.allocator.capacity;
      usedBytes += seg.allocator.used;
    }
    return {
      segments: s.segments.size,
      capacityBytes,
      usedBytes,
      objects: s.objects.size,
      activeLeases: s.leases.active(now),
      softPinned: s.softPinnedCount,
      hardPinned: s.hardPinnedCount,
      evictionsTotal: s.eviction.evictionsTotal,
      clients: s.clients.size,
      ...s.rereplicator.stats(),
      ...s.files.stats(),
      ...s.disk.stats(),
    };
  }

  segmentsDetail(): SegmentDetail[] {
    return [...this.s.segments.all()].map((seg) => ({
      segment_name: seg.name,
      segment_id: seg.segmentId,
      client_id: seg.clientId,
      base_address: seg.baseAddress,
      size_bytes: seg.size,
      te_endpoint: seg.teEndpoint,
      protocol: seg.protocol,
      status: seg.status,
      allocator_used_bytes: seg.allocator.used,
      allocator_capacity_bytes: seg.allocator.capacity,
    }));
  }

  /** Keys of complete (readable) objects. */
  *allKeys(): IterableIterator<string> {
    for (const [key, meta] of this.s.objects) if (meta.complete) yield key;
    // Objects held only by the file tier are readable too.
    for (const key of this.s.files.keys()) if (this.s.objects.get(key) === undefined) yield key;
  }

  /** COMPLETE replicas of an object; [] while it is being written; undefined when absent. */
  queryKey(key: string): ReplicaInfo__Output[] | undefined {
    const s = this.s;
    const meta = s.objects.get(key);
    if (meta === undefined) {
      const file = s.files.get(key);
      return file === undefined ? undefined : fileReplicaReply(file, 0).replica_list;
    }
    if (!meta.complete) return [];
    const view = servedView(s.segments, meta);
    return view === null ? [] : replicaList(s.segments, view);
  }

  /** Keys on the eviction lists, least recently used first (diagnostics and scripts; O(objects)). */
  evictionOrder(): { plain: string[]; softPinned: string[] } {
    const order = this.s.order;
    return { plain: [...order.plain].map((m) => m.key), softPinned: [...order.soft].map((m) => m.key) };
  }

  segmentNames(): string[] {
    return [...this.s.segments.all()].map((seg) => seg.name);
  }

  querySegment(name: string): { used: number; capacity: number } | undefined {
    const seg = this.s.segments.byName(name);
    return seg === undefined ? undefined : { used: seg.allocator.used, capacity: seg.allocator.capacity };
  }

  /** The hosts of the listed clients' segments (the host part of each transfer endpoint). */
  batchQueryIp(req: BatchQueryIpRequest__Output): BatchQueryIpResponse__Output {
    if (!Array.isArray(req.client_ids)) return { status_code: ErrorCode.INVALID_PARAMS, client_ip_map: {} };
    const wanted = new Set(req.client_ids);
    const hosts = new Map<string, Set<string>>();
    for (const seg of this.s.segments.all()) {
      if (!wanted.has(seg.clientId)) continue;
      let set = hosts.get(seg.clientId);
      if (set === undefined) hosts.set(seg.clientId, (set = new Set()));
      set.add(hostOf(seg.teEndpoint));
    }
    const client_ip_map: { [key: string]: IPAddressList__Output } = Object.create(null) as { [key: string]: IPAddressList__Output };
    for (const [client, set] of hosts) client_ip_map[client] = { ip_addresses: [...set] };
    return { status_code: ErrorCode.OK, client_ip_map };
  }

  /**
   * Cross-checks the derived structures against the object map (for tests and debugging; O(all
   * objects)). Returns one line per inconsistency; [] when the eviction lists
   * and the pin counts agree with the objects.
   */
  checkIndexes(): string[] {
    const s = this.s;
    const problems: string[] = [];
    let listed = 0;
    let soft = 0;
    let hard = 0;
    for (const [key, meta] of s.objects) {
      if (meta.key !== key) problems.push(`${key}: meta.key is ${meta.key}`);
      const shouldList = meta.complete && !meta.hardPinned && (meta.flags & FLAG_AWAITING_COPY) === 0;
      if (meta.listed !== shouldList) problems.push(`${key}: listed=${meta.listed}, expected ${shouldList}`);
      if (meta.listed) listed++;
      if (meta.flags & FLAG_SOFT_PIN) soft++;
      if (meta.flags & FLAG_HARD_PIN) hard++;
      if (s.inFlight.has(meta) === meta.complete) problems.push(`${key}: in-flight set disagrees with status`);
    }
    const order = s.order;
    if (order.size !== listed) problems.push(`eviction lists hold ${order.size} objects, expected ${listed}`);
    for (const list of [order.plain, order.soft, order.disk]) {
      for (const meta of list) if (order.listOf(meta) !== list || s.objects.get(meta.key) !== meta) problems.push(`${meta.key}: on the wrong eviction list`);
    }
    if (soft !== s.softPinnedCount || hard !== s.hardPinnedCount) problems.push(`pin counts ${s.softPinnedCount}/${s.hardPinnedCount}, expected ${soft}/${hard}`);
    return problems;
  }
}
