// store top's figures: gauges from the last scrape, rates from two, hit rate of single Gets.
import { parsePromText } from '../common/prom-text.js';
import { renderTop, topStats, type Scrape } from './top-frame.js';

function scrape(atMs: number, o: { puts: number; gets: number; misses: number; batchGets?: number; evictions?: number; objects: number; leader?: number }): Scrape {
  const lines = [
    `store_master_rpc_requests_total{method="PutStart",transport="channel"} ${o.puts}`,
    `store_master_rpc_requests_total{method="GetReplicaList",transport="channel"} ${o.gets}`,
    `store_master_rpc_requests_total{method="BatchGetReplicaList",transport="channel"} ${o.batchGets ?? 0}`,
    `store_master_rpc_errors_total{method="GetReplicaList",code="OBJECT_NOT_FOUND"} ${o.misses}`,
    `store_master_evictions_total ${o.evictions ?? 0}`,
    `store_master_objects ${o.objects}`,
    'store_master_segments 2',
    'store_master_capacity_bytes 1073741824',
    'store_master_used_bytes 268435456',
  ];
  if (o.leader !== undefined) lines.push(`store_master_is_leader ${o.leader}`);
  return { samples: parsePromText(lines.join('\n')), atMs };
}

describe('topStats', () => {
  it('has gauges but no rates from one scrape', () => {
    const st = topStats(scrape(0, { puts: 5, gets: 5, misses: 0, objects: 7 }));
    expect(st).toMatchObject({ objects: 7, segments: 2, capacity_bytes: 2 ** 30, used_bytes: 2 ** 28, rates: null, interval_s: null, is_leader: null });
    expect(renderTop(st, 'http://m:9003', 'T')).toMatch(/rates {5}\(after the next scrape\)/);
  });

  it('computes rates per second and the hit rate between two scrapes', () => {
    const st = topStats(
      scrape(2000, { puts: 30, gets: 120, misses: 30, batchGets: 10, evictions: 4, objects: 9, leader: 1 }),
      scrape(0, { puts: 10, gets: 20, misses: 5, objects: 7 }),
    );
    expect(st.interval_s).toBe(2);
    expect(st.rates).toEqual({ puts_per_s: 10, gets_per_s: 55, rpc_per_s: 65, errors_per_s: 12.5, evictions_per_s: 2, hit_rate: 0.75 });
    expect(st.methods).toEqual([
      { method: 'GetReplicaList', per_s: 50 },
      { method: 'PutStart', per_s: 10 },
      { method: 'BatchGetReplicaList', per_s: 5 },
    ]);
    const frame = renderTop(st, 'http://m:9003', 'T');
    expect(frame).toContain('hit rate 75.0%');
    expect(frame).toContain('used 256.00 MB of 1.00 GB (25.0%)');
    expect(frame).toContain('role      leader');
  });

  it('counts from zero when the counters went down (a restarted master) and shows no hit rate without Gets', () => {
    const st = topStats(scrape(1000, { puts: 3, gets: 0, misses: 0, objects: 1 }), scrape(0, { puts: 100, gets: 0, misses: 0, objects: 50 }));
    expect(st.rates).toMatchObject({ puts_per_s: 3, hit_rate: null });
    expect(renderTop(st, 's', 'T')).toContain('hit rate -');
  });
});
