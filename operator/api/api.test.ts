// Defaults, validation (every error listed) and quantities of the StoreCluster/StoreSegment API.
import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { defaultStoreCluster, defaultStoreSegment } from './defaults.js';
import { formatQuantity, parseQuantity, QUANTITY_PATTERN } from './quantity.js';
import { validateStoreCluster, validateStoreSegment } from './validation.js';
import type { StoreCluster, StoreSegment } from '../gen/index.js';

const sc = (spec: StoreCluster['spec'], name = 'kv'): StoreCluster => ({
  apiVersion: 'store.kvcache.io/v1alpha1',
  kind: 'StoreCluster',
  metadata: { name, namespace: 'ml' },
  spec,
});
const ss = (spec: Partial<StoreSegment['spec']>, name = 'pool'): StoreSegment => ({
  apiVersion: 'store.kvcache.io/v1alpha1',
  kind: 'StoreSegment',
  metadata: { name, namespace: 'ml' },
  spec: { cluster: 'kv', size: '1Gi', ...spec },
});

describe('defaultStoreCluster', () => {
  it('fills the spec defaults of the flags and the operator image, without touching the input', () => {
    const input = sc({});
    const d = defaultStoreCluster(input, { image: 'img:1', namespace: 'default' });
    expect(input.spec).toEqual({});
    expect(d.spec).toMatchObject({
      image: 'img:1',
      clusterId: 'kv',
      master: { replicas: 1, rpcPort: 50051, metricsPort: 9003, allocationStrategy: 'random' },
      metadataServer: { type: 'http', port: 8080 },
      sidecar: { image: 'img:1', globalSegmentSize: '4Gi', localBufferSize: '1Gi', protocol: 'tcp', httpPort: 8080, rpcPort: 50052 },
    });
  });

  it('keeps what the user set', () => {
    const d = defaultStoreCluster(sc({ image: 'mine', master: { replicas: 3, haBackend: {} }, sidecar: { image: 'side', protocol: 'rdma' } }));
    expect(d.spec.master.replicas).toBe(3);
    expect(d.spec.master.haBackend).toEqual({ type: 'k8s' });
    expect(d.spec.sidecar.image).toBe('side');
    expect(d.spec.sidecar.protocol).toBe('rdma');
  });

  it('is idempotent', () => {
    const once = defaultStoreCluster(sc({ master: { replicas: 2, haBackend: { type: 'redis', connstring: 'redis://r:6379' } } }));
    expect(defaultStoreCluster(once)).toEqual(once);
  });
});

describe('defaultStoreSegment', () => {
  it('defaults memory kind, hugepage size only for hugepages, replicas and protocol', () => {
    expect(defaultStoreSegment(ss({})).spec).toMatchObject({ replicas: 1, memory: { kind: 'shm' }, protocol: 'tcp', httpPort: 8080 });
    expect(defaultStoreSegment(ss({})).spec.memory.hugePageSize).toBeUndefined();
    expect(defaultStoreSegment(ss({ memory: { kind: 'hugepage' } })).spec.memory.hugePageSize).toBe('2Mi');
  });
});

describe('validateStoreCluster', () => {
  it('accepts the example and the defaults', () => {
    const example = yaml.load(readFileSync('crds/examples/storecluster.yaml', 'utf8')) as StoreCluster;
    expect(validateStoreCluster(defaultStoreCluster(example))).toEqual([]);
    expect(validateStoreCluster(defaultStoreCluster(sc({})))).toEqual([]);
  });

  it('reports every error at once, each naming its field', () => {
    const errors = validateStoreCluster(
      defaultStoreCluster(
        sc(
          {
            master: { replicas: 3, rpcPort: 9003, defaultKvLeaseTtl: '5 seconds', evictionRatio: 2, extraFlags: { rpc_port: '1', 'Bad-Flag': 'x' } },
            sidecar: { globalSegmentSize: 'lots' },
          },
          'Bad_Name',
        ),
      ),
    );
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^metadata.name: "Bad_Name" must be a DNS-1035 label/),
        expect.stringMatching(/^spec.master: Invalid value: "object": haBackend is required when master.replicas > 1/),
        expect.stringMatching(/^spec: Invalid value: "object": metadataServer.type 'http' is embedded in the master and has no HA/),
        expect.stringMatching(/^spec.master.metricsPort: 9003 is already used by spec.master.rpcPort/),
        expect.stringMatching(/^spec.master.defaultKvLeaseTtl: Invalid value: "5 seconds": .* should match/),
        expect.stringMatching(/^spec.master.evictionRatio: Invalid value: 2: .* should be less than or equal to 1/),
        expect.stringMatching(/^spec.master.extraFlags: "rpc_port" is set by the operator/),
        expect.stringMatching(/^spec.master.extraFlags: "Bad-Flag" is not a flag name/),
        expect.stringMatching(/^spec.sidecar.globalSegmentSize: Invalid value: "lots": .* should match/),
      ]),
    );
    expect(errors).toHaveLength(9);
  });

  it('requires a connstring for etcd and redis HA backends and an address for external metadata', () => {
    const errors = validateStoreCluster(defaultStoreCluster(sc({ master: { replicas: 2, haBackend: { type: 'etcd' } }, metadataServer: { type: 'redis' } })));
    expect(errors).toEqual([
      'spec.master.haBackend: Invalid value: "object": haBackend.connstring is required for the etcd and redis backends',
      'spec.metadataServer: Invalid value: "object": metadataServer.address is required for the etcd and redis types',
    ]);
  });

  it('refuses names whose derived object names would exceed 63 characters', () => {
    expect(validateStoreCluster(defaultStoreCluster(sc({}, 'a'.repeat(48))))).toEqual([expect.stringMatching(/at most 47/)]);
  });
});

describe('validateStoreSegment', () => {
  it('accepts the example', () => {
    const example = yaml.load(readFileSync('crds/examples/storesegment.yaml', 'utf8')) as StoreSegment;
    expect(validateStoreSegment(defaultStoreSegment(example))).toEqual([]);
  });

  it('lists every problem of a bad segment', () => {
    const errors = validateStoreSegment(defaultStoreSegment(ss({ cluster: '', size: '3Mi', replicas: -1, memory: { kind: 'hugepage', devicePath: '/dev/dax0.0' } })));
    expect(errors).toEqual([
      'spec.cluster: Invalid value: "": spec.cluster in body should be at least 1 chars long',
      'spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0',
      'spec.memory: Invalid value: "object": memory.devicePath applies only to memory.kind dax',
      'spec.size: 3Mi is not a whole number of 2Mi huge pages',
    ]);
  });

  it('requires a DAX device path for dax memory', () => {
    expect(validateStoreSegment(defaultStoreSegment(ss({ memory: { kind: 'dax' } })))).toEqual([
      'spec.memory: Invalid value: "object": memory.devicePath is required when memory.kind is dax',
    ]);
    expect(validateStoreSegment(defaultStoreSegment(ss({ memory: { kind: 'dax', devicePath: '/etc/passwd' } })))).toEqual([
      expect.stringMatching(/^spec.memory.devicePath: Invalid value: "\/etc\/passwd": .* should match/),
    ]);
  });
});

describe('quantities', () => {
  it('reads Kubernetes binary and decimal suffixes and the spec spelling', () => {
    expect(parseQuantity('64Gi')).toBe(64 * 2 ** 30);
    expect(parseQuantity('1.5Gi')).toBe(1.5 * 2 ** 30);
    expect(parseQuantity('2G')).toBe(2e9);
    expect(parseQuantity('4GB')).toBe(4 * 2 ** 30);
    expect(parseQuantity(4096)).toBe(4096);
    expect(() => parseQuantity('4 gigs')).toThrow(/expected e.g. 4Gi/);
    expect(() => parseQuantity(-1)).toThrow(/non-negative/);
  });

  it('formats exactly in the largest binary unit', () => {
    expect(formatQuantity(16 * 2 ** 30)).toBe('16Gi');
    expect(formatQuantity(16640 * 2 ** 20)).toBe('16640Mi');
    expect(formatQuantity(1000)).toBe('1000');
  });

  it('uses the same pattern as the CRDs', () => {
    for (const f of ['crds/store.kvcache.io_storeclusters.yaml', 'crds/store.kvcache.io_storesegments.yaml']) {
      expect(readFileSync(f, 'utf8')).toContain(`pattern: '${QUANTITY_PATTERN}'`);
    }
  });
});
