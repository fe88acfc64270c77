// The client metrics' Prometheus text (names, labels, cumulative buckets, _sum/_count), the
// settings read from MC_STORE_CLIENT_METRIC*, the summary line and the extension API.
import { ClientMetrics, bucketIndex, clientMetricsSettings, LATENCY_BUCKETS_S } from './client-metrics.js';
import { ObjectNotFoundError, TransferError } from './errors.js';

/** A clock the test moves by hand (ms). */
function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

/** The sample lines of `text` (no comments), as "name{labels} value". */
function samples(text: string): string[] {
  return text.split('\n').filter((l) => l && !l.startsWith('#'));
}

describe('client metrics settings', () => {
  it('defaults to on, no periodic summary, cluster store_cluster', () => {
    expect(clientMetricsSettings({})).toEqual({ enabled: true, intervalSeconds: 0, clusterId: 'store_cluster', warnings: [] });
  });

  it('reads 0/false as off, the interval and the cluster id', () => {
    expect(clientMetricsSettings({ MC_STORE_CLIENT_METRIC: '0' }).enabled).toBe(false);
    expect(clientMetricsSettings({ MC_STORE_CLIENT_METRIC: 'FALSE' }).enabled).toBe(false);
    expect(clientMetricsSettings({ MC_STORE_CLIENT_METRIC: '1' }).enabled).toBe(true);
    expect(clientMetricsSettings({ MC_STORE_CLIENT_METRIC_INTERVAL: '2.5', MC_STORE_CLUSTER_ID: 'c9' })).toMatchObject({ intervalSeconds: 2.5, clusterId: 'c9' });
  });

  it('keeps the defaults for values it does not understand, and says so', () => {
    const s = clientMetricsSettings({ MC_STORE_CLIENT_METRIC: 'maybe', MC_STORE_CLIENT_METRIC_INTERVAL: '-3' });
    expect(s).toMatchObject({ enabled: true, intervalSeconds: 0 });
    expect(s.warnings).toHaveLength(2);
    expect(s.warnings[0]).toMatch(/MC_STORE_CLIENT_METRIC="maybe"/);
    expect(s.warnings[1]).toMatch(/MC_STORE_CLIENT_METRIC_INTERVAL="-3"/);
    expect(ClientMetrics.fromSettings(clientMetricsSettings({ MC_STORE_CLIENT_METRIC: 'off' }))).toBeUndefined();
  });
});

describe('client metrics text', () => {
  it('puts latencies in sub-millisecond buckets, upper bounds inclusive', () => {
    expect(LATENCY_BUCKETS_S[0]).toBe(0.00005);
    expect(LATENCY_BUCKETS_S[LATENCY_BUCKETS_S.length - 1]).toBe(10);
    expect(bucketIndex(0.00001)).toBe(0);
    expect(bucketIndex(0.00005)).toBe(0);
    expect(bucketIndex(0.00006)).toBe(1);
    expect(bucketIndex(11)).toBe(LATENCY_BUCKETS_S.length); // +Inf
  });

  it('reports ops, items, bytes, errors by code and a cumulative histogram, labelled with the cluster', async () => {
    const c = clock();
    const m = new ClientMetrics('c1', c.now);
    let start = m.start();
    c.advance(0.2); // 200 us
    m.ok('get', start, 4096);
    start = m.start();
    c.advance(3); // 3 ms
    m.ok('get', start, 4096);
    start = m.start();
    c.advance(0.04);
    m.fail('get', start, new ObjectNotFoundError('get "x"'));
    start = m.start();
    c.advance(1);
    m.ok('put_batch', start, 3000, 3);
    m.itemErrors('put_batch', [new TransferError('piece failed')]);
    m.transfer('inline', 'read', 4096);
    m.transfer('engine', 'write', 1000);
    m.transfer('engine', 'write', 2000);

    const text = await m.text();
    expect(text).toContain('# TYPE store_client_op_latency_seconds histogram');
    expect(text).toContain('# TYPE store_client_ops_total counter');
    const lines = samples(text);
    expect(lines).toContain('store_client_ops_total{op="get",cluster_id="c1"} 3');
    expect(lines).toContain('store_client_ops_total{op="put",cluster_id="c1"} 0');
    expect(lines).toContain('store_client_op_items_total{op="put_batch",cluster_id="c1"} 3');
    expect(lines).toContain('store_client_op_bytes_total{op="get",cluster_id="c1"} 8192');
    expect(lines).toContain('store_client_op_errors_total{op="get",code="OBJECT_NOT_FOUND",cluster_id="c1"} 1');
    expect(lines).toContain('store_client_op_errors_total{op="put_batch",code="TRANSFER_FAILED",cluster_id="c1"} 1');
    // 40 us and 200 us and 3 ms: cumulative counts per upper bound
    expect(lines).toContain('store_client_op_latency_seconds_bucket{op="get",le="0.00005",cluster_id="c1"} 1');
    expect(lines).toContain('store_client_op_latency_seconds_bucket{op="get",le="0.0001",cluster_id="c1"} 1');
    expect(lines).toContain('store_client_op_latency_seconds_bucket{op="get",le="0.00025",cluster_id="c1"} 2');
    expect(lines).toContain('store_client_op_latency_seconds_bucket{op="get",le="0.0025",cluster_id="c1"} 2');
    expect(lines).toContain('store_client_op_latency_seconds_bucket{op="get",le="0.005",cluster_id="c1"} 3');
    expect(lines).toContain('store_client_op_latency_seconds_bucket{op="get",le="+Inf",cluster_id="c1"} 3');
    expect(lines).toContain('store_client_op_latency_seconds_count{op="get",cluster_id="c1"} 3');
    const sum = lines.find((l) => l.startsWith('store_client_op_latency_seconds_sum{op="get"'));
    expect(Number(sum!.split(' ')[1])).toBeCloseTo(0.00324, 8);
    // an op never called has no histogram series
    expect(lines.some((l) => l.includes('latency') && l.includes('op="remove"'))).toBe(false);
    expect(lines).toContain('store_client_transport_bytes_total{transport="inline",direction="read",cluster_id="c1"} 4096');
    expect(lines).toContain('store_client_transport_bytes_total{transport="engine",direction="write",cluster_id="c1"} 3000');
    expect(lines).toContain('store_client_transport_pieces_total{transport="engine",direction="write",cluster_id="c1"} 2');
    // every sample line is `name{labels} number`
    for (const l of lines) expect(l).toMatch(/^[a-z_]+\{[^}]*\} [0-9.e+-]+$/);
    // a second scrape reports the same totals (collect() resets and refills)
    expect(samples(await m.text())).toEqual(lines);
  });

  it('track() records the outcome of a promise and passes it on', async () => {
    const c = clock();
    const m = new ClientMetrics('c1', c.now);
    await expect(m.track('get_into', m.start(), Promise.resolve(42), (n) => n)).resolves.toBe(42);
    const boom = new TransferError('down');
    await expect(m.track('get_into', m.start(), Promise.reject(boom), (n: number) => n)).rejects.toBe(boom);
    expect(m.stats('get_into')).toEqual({ calls: 2, items: 2, bytes: 42, failed: 1, errors: { TRANSFER_FAILED: 1 } });
  });

  it('adds gauges and counters of other parts to the same registry', async () => {
    const m = new ClientMetrics('c1');
    let dummies = 2;
    m.addGauge('store_dummy_clients_connected', 'dummy clients connected', () => dummies);
    const regions = m.addCounter('store_dummy_regions_mapped_total', 'dummy regions mapped', ['kind']);
    regions.inc({ kind: 'memfd' }, 3);
    dummies = 5;
    const lines = samples(await m.text());
    expect(lines).toContain('store_dummy_clients_connected{cluster_id="c1"} 5');
    expect(lines).toContain('store_dummy_regions_mapped_total{kind="memfd",cluster_id="c1"} 3');
    expect(() => m.addGauge('store_dummy_clients_connected', 'again', () => 0)).toThrow(/already been registered/);
    expect(m.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
  });

  it('summarizes what happened since the previous summary on one line', () => {
    const c = clock();
    const m = new ClientMetrics('c1', c.now);
    let start = m.start();
    c.advance(2);
    m.ok('put', start, 2048);
    start = m.start();
    c.advance(4);
    m.fail('put', start, new TransferError('x'));
    m.transfer('memcpy', 'write', 2048);
    c.advance(994);
    const line = m.summary();
    expect(line).not.toContain('\n');
    expect(line).toBe('client metrics [cluster c1] last 1.0 s: put 2 (1 failed, 2.0 KiB, mean 3.000 ms) | memcpy read 0 B write 2.0 KiB');
    c.advance(500);
    expect(m.summary()).toBe('client metrics [cluster c1] last 0.5 s: no operations');
  });
});
