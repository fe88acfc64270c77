// The hit rate over about the last minute from successive counter scrapes.
import { formatHitRate, HitRateWindow } from './hit-rate.js';
import { figuresOf } from './master-figures.js';

test('hits over lookups between the oldest kept scrape and the newest, about a minute', () => {
  const w = new HitRateWindow();
  expect(w.rate()).toBeUndefined();
  w.record(0, { lookups: 100, misses: 10 });
  expect(w.rate()).toBeUndefined(); // one scrape: no interval yet
  w.record(30_000, { lookups: 200, misses: 20 });
  expect(w.rate()).toEqual({ hitRate: 0.9, windowSeconds: 30 });
  w.record(60_000, { lookups: 300, misses: 20 });
  expect(w.rate()).toEqual({ hitRate: 0.95, windowSeconds: 60 });
  // the scrape at 0 leaves once a newer one is a minute old: the window slides
  w.record(90_000, { lookups: 400, misses: 20 });
  expect(w.rate()).toEqual({ hitRate: 1, windowSeconds: 60 });
  expect(formatHitRate(w.rate())).toBe('100.0%');
});

test('no lookups is "-"; a counter that goes down (a new master) starts over', () => {
  const w = new HitRateWindow();
  w.record(0, { lookups: 50, misses: 5 });
  w.record(30_000, { lookups: 50, misses: 5 });
  expect(formatHitRate(w.rate())).toBe('-');
  w.record(60_000, { lookups: 3, misses: 1 });
  expect(w.rate()).toBeUndefined();
  w.record(90_000, { lookups: 7, misses: 2 });
  expect(formatHitRate(w.rate())).toBe('75.0%');
});

test("the master's figures from its /metrics text", () => {
  const text = [
    '# TYPE store_master_objects gauge',
    'store_master_objects 1234',
    'store_master_rpc_requests_total{method="GetReplicaList",transport="channel"} 90',
    'store_master_rpc_requests_total{method="GetReplicaList",transport="grpc"} 10',
    'store_master_rpc_requests_total{method="PutStart",transport="channel"} 500',
    'store_master_rpc_errors_total{method="GetReplicaList",code="OBJECT_NOT_FOUND"} 7',
    'store_master_rpc_errors_total{method="GetReplicaList",code="INVALID_KEY"} 1',
  ].join('\n');
  expect(figuresOf(text)).toEqual({ objects: 1234, lookups: 100, misses: 7 });
});
