// Reading the Prometheus text format: samples, labels with escapes, comments, special values.
import { has, parsePromText, total } from './prom-text.js';

const TEXT = `# HELP store_master_rpc_requests_total RPC requests served
# TYPE store_master_rpc_requests_total counter
store_master_rpc_requests_total{method="GetReplicaList",transport="channel"} 10
store_master_rpc_requests_total{method="GetReplicaList",transport="grpc"} 5
store_master_rpc_requests_total{method="PutStart",transport="channel"} 3 1700000000000
store_master_objects 42

odd{path="a\\"b\\\\c\\nd"} +Inf
broken{method="x" 1
nan_metric NaN
`;

describe('parsePromText', () => {
  const s = parsePromText(TEXT);
  it('reads samples, labels and values, skipping comments and broken lines', () => {
    expect(s.filter((x) => x.name === 'broken')).toEqual([]);
    expect(s.find((x) => x.name === 'odd')).toEqual({ name: 'odd', labels: { path: 'a"b\\c\nd' }, value: Infinity });
    expect(Number.isNaN(s.find((x) => x.name === 'nan_metric')!.value)).toBe(true);
    expect(total(s, 'store_master_objects')).toBe(42);
  });

  it('sums samples whose labels match one value or one of several', () => {
    expect(total(s, 'store_master_rpc_requests_total', { method: 'GetReplicaList' })).toBe(15);
    expect(total(s, 'store_master_rpc_requests_total', { method: ['GetReplicaList', 'PutStart'], transport: 'channel' })).toBe(13);
    expect(total(s, 'store_master_rpc_requests_total')).toBe(18);
    expect(total(s, 'absent')).toBe(0);
    expect(has(s, 'store_master_is_leader')).toBe(false);
  });
});
