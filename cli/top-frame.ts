// What `store top` shows: the master's gauges from the latest scrape of /metrics and rates from
// the difference between two successive scrapes (counters: calls per second by RPC, evictions, the
// hit rate of single Gets). Pure: scrapes in, a stats object and its text frame out.
import { formatSize } from '../common/size.js';
import { has, total, type Sample } from '../common/prom-text.js';
import { percent, rate, table } from './output.js';

export interface Scrape {
  samples: Sample[];
  /** Monotonic time of the scrape, ms. */
  atMs: number;
}

export interface TopStats {
  segments: number;
  clients: number;
  objects: number;
  active_leases: number;
  soft_pinned: number;
  hard_pinned: number;
  capacity_bytes: number;
  used_bytes: number;
  /** 1 leader, 0 standby; null when the master is not in HA mode. */
  is_leader: number | null;
  /** Seconds between the two scrapes the rates come from (null: one scrape, no rates). */
  interval_s: number | null;
  rates: {
    /** PutStart + BatchPutStart + UpsertStart + BatchUpsertStart calls. */
    puts_per_s: number;
    /** GetReplicaList + BatchGetReplicaList calls. */
    gets_per_s: number;
    rpc_per_s: number;
    errors_per_s: number;
    evictions_per_s: number;
    /** Share of GetReplicaList calls that found their key; null with no such call in the interval. */
    hit_rate: number | null;
  } | null;
  /** RPC methods called in the interval, busiest first. */
  methods: { method: string; per_s: number }[];
}

const REQUESTS = 'store_master_rpc_requests_total';
const ERRORS = 'store_master_rpc_errors_total';
const PUT_METHODS = ['PutStart', 'BatchPutStart', 'UpsertStart', 'BatchUpsertStart'];
const GET_METHODS = ['GetReplicaList', 'BatchGetReplicaList'];

function perMethod(samples: readonly Sample[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const s of samples) if (s.name === REQUESTS) m.set(s.labels.method ?? '', (m.get(s.labels.method ?? '') ?? 0) + s.value);
  return m;
}

/** Gauges of `cur`, rates of `cur` against `prev` (a counter that went down, a restarted master, counts from 0). */
export function topStats(cur: Scrape, prev?: Scrape): TopStats {
  const s = cur.samples;
  const stats: TopStats = {
    segments: total(s, 'store_master_segments'),
    clients: total(s, 'store_master_clients'),
    objects: total(s, 'store_master_objects'),
    active_leases: total(s, 'store_master_active_leases'),
    soft_pinned: total(s, 'store_master_soft_pinned_objects'),
    hard_pinned: total(s, 'store_master_hard_pinned_objects'),
    capacity_bytes: total(s, 'store_master_capacity_bytes'),
    used_bytes: total(s, 'store_master_used_bytes'),
    is_leader: has(s, 'store_master_is_leader') ? total(s, 'store_master_is_leader') : null,
    interval_s: null,
    rates: null,
    methods: [],
  };
  if (!prev || cur.atMs <= prev.atMs) return stats;
  const secs = (cur.atMs - prev.atMs) / 1000;
  const p = prev.samples;
  const delta = (name: string, match: Record<string, string | readonly string[]> = {}): number => {
    const d = total(s, name, match) - total(p, name, match);
    return d >= 0 ? d : total(s, name, match);
  };
  const gets = delta(REQUESTS, { method: 'GetReplicaList' });
  const misses = delta(ERRORS, { method: 'GetReplicaList', code: 'OBJECT_NOT_FOUND' });
  stats.interval_s = secs;
  stats.rates = {
    puts_per_s: delta(REQUESTS, { method: PUT_METHODS }) / secs,
    gets_per_s: delta(REQUESTS, { method: GET_METHODS }) / secs,
    rpc_per_s: delta(REQUESTS) / secs,
    errors_per_s: delta(ERRORS) / secs,
    evictions_per_s: delta('store_master_evictions_total') / secs,
    hit_rate: gets > 0 ? Math.max(0, gets - misses) / gets : null,
  };
  const before = perMethod(p);
  stats.methods = [...perMethod(s)]
    .map(([method, n]) => {
      const d = n - (before.get(method) ?? 0);
      return { method, per_s: (d >= 0 ? d : n) / secs };
    })
    .filter((m) => m.per_s > 0)
    .sort((a, b) => b.per_s - a.per_s || a.method.localeCompare(b.method));
  return stats;
}

/** The text frame of `store top`. */
export function renderTop(st: TopStats, source: string, clock: string): string {
  const lines = [`store top  ${source}  ${clock}${st.interval_s !== null ? `  (rates over ${st.interval_s.toFixed(1)} s)` : ''}`];
  if (st.is_leader !== null) lines.push(`role      ${st.is_leader === 1 ? 'leader' : 'standby (not serving)'}`);
  lines.push(`segments  ${st.segments}   clients ${st.clients}`);
  lines.push(`objects   ${rate(st.objects)}   leases ${rate(st.active_leases)}   pinned soft ${rate(st.soft_pinned)} hard ${rate(st.hard_pinned)}`);
  lines.push(`memory    used ${formatSize(st.used_bytes)} of ${formatSize(st.capacity_bytes)} (${percent(st.used_bytes, st.capacity_bytes)})`);
  const r = st.rates;
  if (r) {
    lines.push(
      `rates     puts/s ${rate(r.puts_per_s)}   gets/s ${rate(r.gets_per_s)}   hit rate ${r.hit_rate === null ? '-' : `${(100 * r.hit_rate).toFixed(1)}%`}   evictions/s ${rate(r.evictions_per_s)}`,
    );
    lines.push(`rpc       calls/s ${rate(r.rpc_per_s)}   errors/s ${rate(r.errors_per_s)}`);
    if (st.methods.length) {
      lines.push('');
      lines.push(
        table(
          ['METHOD', 'CALLS/S'],
          st.methods.slice(0, 10).map((m) => [m.method, rate(m.per_s)]),
          [false, true],
        ).trimEnd(),
      );
    }
  } else {
    lines.push('rates     (after the next scrape)');
  }
  return lines.join('\n') + '\n';
}
