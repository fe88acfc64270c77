// The figures of a cluster's status that come from its master's /metrics: how many objects it
// holds, and its GetReplicaList lookups and misses (OBJECT_NOT_FOUND) for the hit rate. Batched
// lookups count as calls here, not per key (their per-key misses are not in the master's metrics).
import { parsePromText, total } from '../../common/prom-text.js';
import type { LookupCounters } from './hit-rate.js';
import { getFromMaster } from './master-http.js';
import type { TlsMaterial } from '../../common/tls-material.js';

export interface MasterFigures extends LookupCounters {
  objects: number;
}

/** GETs `<baseUrl>/metrics` and reads the figures; rejects with a readable error. */
export type MasterFiguresFetcher = (baseUrl: string, tls?: TlsMaterial) => Promise<MasterFigures>;

export function figuresOf(text: string): MasterFigures {
  const samples = parsePromText(text);
  return {
    objects: total(samples, 'store_master_objects'),
    lookups: total(samples, 'store_master_rpc_requests_total', { method: 'GetReplicaList' }),
    misses: total(samples, 'store_master_rpc_errors_total', { method: 'GetReplicaList', code: 'OBJECT_NOT_FOUND' }),
  };
}

export const httpMasterFiguresFetcher: MasterFiguresFetcher = async (baseUrl, tls) => {
  const res = await getFromMaster(`${baseUrl.replace(/\/$/, '')}/metrics`, 5000, tls);
  return figuresOf(await res.text());
};
