// The leader gate over a real MasterCore: followers refuse every RPC with
// UNAVAILABLE_IN_CURRENT_STATUS, a new term starts from a fresh core with a higher view_version
// (clients must remount), and the renew deadline is checked on every call.
import { ErrorCode } from '../../common/error-code.js';
import { masterMethods } from '../../common/master-proto.js';
import { MasterCore } from '../core/master-core.js';
import { coreConfigFromFlags } from '../master-startup.js';
import { parseMasterFlags } from '../master-flags.js';
import { advertisedHost, createBackend } from './ha-master.js';
import { parseLeaseRef } from './lease-ref.js';
import { LeaderGate } from './leader-gate.js';
import { parseRedisLeaderValue, redisOptionsFromUrl } from './redis-backend.js';
import { parseEtcdEndpoints } from './etcd-backend.js';

const CLIENT = '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b';
const flags = parseMasterFlags([]).flags;

function gate(serving: { until: number }): LeaderGate {
  return new LeaderGate(
    masterMethods,
    (v) => new MasterCore(coreConfigFromFlags(flags, v)),
    (now) => now < serving.until,
  );
}

type Rpc = (req: object, now: number) => { status_code: number; [k: string]: unknown };

describe('LeaderGate', () => {
  it('answers every RPC with UNAVAILABLE_IN_CURRENT_STATUS while following', () => {
    const g = gate({ until: Infinity });
    for (const m of masterMethods) {
      expect((g.rpcTarget[m.call] as Rpc)({}, 0).status_code).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    }
    expect(g.port.stats(0).segments).toBe(0);
    expect([...g.port.allKeys()]).toEqual([]);
  });

  it('serves a fresh core per term: clients known in one term must remount in the next', () => {
    const g = gate({ until: Infinity });
    const ping = g.rpcTarget.ping as Rpc;
    const mount = g.rpcTarget.mountSegment as Rpc;
    const v1 = g.lead(1_000);
    expect(ping({ client_id: CLIENT }, 0)).toMatchObject({ status_code: ErrorCode.OK, view_version: v1, need_remount: true });
    const seg = { buffer: 1 << 20, size: 64 << 20, segment_name: 'seg-a', client_id: CLIENT, te_endpoint: '127.0.0.1:20001', protocol: 'tcp' };
    expect(mount(seg, 1).status_code).toBe(ErrorCode.OK);
    expect(ping({ client_id: CLIENT }, 2)).toMatchObject({ status_code: ErrorCode.OK, need_remount: false });
    expect(g.port.segmentNames()).toEqual(['seg-a']);

    g.follow();
    expect(ping({ client_id: CLIENT }, 3).status_code).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    expect(g.port.segmentNames()).toEqual([]);

    // Same wall clock reading: the view_version still moves up.
    const v2 = g.lead(1_000);
    expect(v2).toBeGreaterThan(v1);
    expect(ping({ client_id: CLIENT }, 4)).toMatchObject({ status_code: ErrorCode.OK, view_version: v2, need_remount: true });
    expect(g.port.segmentNames()).toEqual([]);
  });

  it('serves the whole-table RPCs in steps, checking leadership before each step', () => {
    const g = gate({ until: Infinity });
    const steps = g.rpcTarget.removeAllSteps as unknown as (req: object, now: number) => Generator<void, { status_code: number; removed_count?: number }, number>;
    expect(g.rpcTarget.getReplicaListSteps).toBeUndefined(); // only the table walks are stepped
    expect(steps({}, 0).next(0)).toEqual({ done: true, value: { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS } });
    g.lead(1_000);
    const mount = g.rpcTarget.mountSegment as Rpc;
    expect(mount({ buffer: 1 << 20, size: 1 << 30, segment_name: 's', client_id: CLIENT, te_endpoint: '127.0.0.1:1', protocol: 'tcp' }, 1).status_code).toBe(ErrorCode.OK);
    for (let i = 0; i < 10_000; i++) {
      (g.rpcTarget.putStart as Rpc)({ key: `k${i}`, value_length: 64, slice_lengths: [64], config: null }, 1);
      (g.rpcTarget.putEnd as Rpc)({ key: `k${i}`, replica_type: 0 }, 1);
    }
    // run to the end while leading
    const all = steps({}, 2);
    let r = all.next(2);
    while (!r.done) r = all.next(2);
    expect(r.value).toEqual({ status_code: ErrorCode.OK, removed_count: 10_000 });
    // a term that ends between two steps ends the walk: the answer says so
    for (let i = 0; i < 10_000; i++) {
      (g.rpcTarget.putStart as Rpc)({ key: `k${i}`, value_length: 64, slice_lengths: [64], config: null }, 3);
      (g.rpcTarget.putEnd as Rpc)({ key: `k${i}`, replica_type: 0 }, 3);
    }
    const cut = steps({}, 4);
    expect(cut.next(4).done).toBe(false);
    g.follow();
    expect(cut.next(5)).toEqual({ done: true, value: { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS } });
  });

  it('refuses RPCs past the serving deadline even before the election notices', () => {
    const serving = { until: 100 };
    const g = gate(serving);
    g.lead(5);
    const ping = g.rpcTarget.ping as Rpc;
    expect(ping({ client_id: CLIENT }, 99).status_code).toBe(ErrorCode.OK);
    expect(ping({ client_id: CLIENT }, 100).status_code).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    expect(g.port.sweep(100)).toEqual({ droppedClients: [], unmountedSegments: [], evictedObjects: 0, releasedZombies: 0, underReplicated: 0 });
  });
});

describe('HA startup helpers', () => {
  it('advertises a concrete address, POD_IP for a wildcard bind, and refuses 0.0.0.0 otherwise', () => {
    expect(advertisedHost('10.1.2.3', {})).toBe('10.1.2.3');
    expect(advertisedHost('0.0.0.0', { POD_IP: '10.9.8.7' })).toBe('10.9.8.7');
    expect(() => advertisedHost('0.0.0.0', {})).toThrow(/cannot be advertised in HA mode.*--rpc_address=<reachable IP>/);
  });

  it('needs the backend connection for each type and explains the expected form', () => {
    const f = { ha_backend_type: 'etcd' as const, ha_backend_connstring: '', etcd_endpoints: '', cluster_id: 'c1' };
    expect(() =>
      createBackend(
        f,
        {},
        () => 0,
        () => undefined,
      ),
    ).toThrow(/--etcd_endpoints \(host:port;host:port\) is required/);
    expect(() =>
      createBackend(
        { ...f, ha_backend_type: 'k8s' },
        {},
        () => 0,
        () => undefined,
      ),
    ).toThrow(/<namespace>\/<lease-name>/);
    expect(() =>
      createBackend(
        { ...f, ha_backend_type: 'k8s', ha_backend_connstring: 'Bad_NS' },
        {},
        () => 0,
        () => undefined,
      ),
    ).toThrow(/expected <namespace>\/<lease-name>/);
    expect(() =>
      createBackend(
        { ...f, ha_backend_type: 'redis', ha_backend_connstring: 'http://x:1' },
        {},
        () => 0,
        () => undefined,
      ),
    ).toThrow(/scheme must be redis:\/\//);
  });

  it('parses endpoints, lease references and leader values', () => {
    expect(parseEtcdEndpoints('10.0.0.1:2379;10.0.0.2:2379')).toEqual(['http://10.0.0.1:2379', 'http://10.0.0.2:2379']);
    expect(() => parseEtcdEndpoints(' ; ')).toThrow(/no etcd endpoint/);
    expect(parseLeaseRef('kv/store-master-leader')).toEqual({ namespace: 'kv', leaseName: 'store-master-leader' });
    expect(redisOptionsFromUrl('redis://:pw@10.0.0.5:6380/2')).toMatchObject({ host: '10.0.0.5', port: 6380, password: 'pw', db: 2 });
    expect(parseRedisLeaderValue('{"address":"10.0.0.1:50051","token":7}')).toEqual({ address: '10.0.0.1:50051', token: 7 });
    expect(parseRedisLeaderValue('10.0.0.1:50051')).toEqual({ address: '10.0.0.1:50051', token: 0 });
    expect(parseRedisLeaderValue('garbage')).toBeUndefined();
  });
});
