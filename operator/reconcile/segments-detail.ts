// Reads the master's /get_segments_detail (HTTP management endpoint, through the metrics
// Service) and sums it for status. The fetch is injected so tests can point it at a real master
// process or leave it out.
import { getFromMaster } from './master-http.js';
import type { TlsMaterial } from '../../common/tls-material.js';

export interface SegmentDetail {
  segment_name: string;
  segment_id?: string;
  client_id?: string;
  size_bytes: number;
  te_endpoint?: string;
  status?: string;
  allocator_used_bytes?: number;
  allocator_capacity_bytes?: number;
}
export interface SegmentsDetail {
  total_segments: number;
  segments: SegmentDetail[];
}

/** GETs `<baseUrl>/get_segments_detail`; rejects with a readable error. */
export type SegmentsFetcher = (baseUrl: string, tls?: TlsMaterial) => Promise<SegmentsDetail>;

export const httpSegmentsFetcher: SegmentsFetcher = async (baseUrl, tls) => {
  const url = `${baseUrl.replace(/\/$/, '')}/get_segments_detail`;
  const res = await getFromMaster(url, 5000, tls);
  const body = (await res.json()) as Partial<SegmentsDetail>;
  if (!Array.isArray(body.segments)) throw new Error(`GET ${url}: no "segments" array in the reply`);
  return { total_segments: body.total_segments ?? body.segments.length, segments: body.segments };
};

export interface SegmentTotals {
  segments: number;
  capacityBytes: number;
  usedBytes: number;
  /** Segments being unmounted (status UNMOUNTING): closed to new objects, not counted above. */
  draining: number;
}

/** Totals over mounted segments; `hosts` restricts to segments served from those pod IPs/names. */
export function sumSegments(detail: SegmentsDetail, hosts?: Set<string>): SegmentTotals {
  let segments = 0;
  let capacityBytes = 0;
  let usedBytes = 0;
  let draining = 0;
  for (const s of detail.segments) {
    if (hosts && !hosts.has(hostOf(s.te_endpoint ?? s.segment_name))) continue;
    if (s.status === 'UNMOUNTING') draining++;
    if (s.status && s.status !== 'MOUNTED') continue;
    segments++;
    capacityBytes += s.allocator_capacity_bytes ?? s.size_bytes;
    usedBytes += s.allocator_used_bytes ?? 0;
  }
  return { segments, capacityBytes, usedBytes, draining };
}

function hostOf(endpoint: string): string {
  const m = /^\[?([^\]]+?)\]?(?::\d+)?$/.exec(endpoint);
  return m ? m[1] : endpoint;
}
