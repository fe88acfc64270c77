// The CRDs, checked as the API server checks them (shared structural schema, CEL rules from the
// YAML): they accept the examples and what the operator itself writes (defaulted specs, computed
// status), reject bad objects with every violation listed, and each x-kubernetes-validations rule
// refuses an object that breaks it with the rule's own message.
import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { checkCustomResource, loadCrdSchemas } from './crd-schema.js';
import { defaultStoreCluster, defaultStoreSegment } from './defaults.js';
import { clusterStatus, segmentStatus } from '../reconcile/status.js';
import type { StoreCluster, StoreSegment } from '../gen/index.js';

const crds = loadCrdSchemas();
const clusterCrd = crds.get('StoreCluster')!;
const segmentCrd = crds.get('StoreSegment')!;
const clusterSchema = clusterCrd.schema;
const segmentSchema = segmentCrd.schema;
const load = (f: string) => yaml.load(readFileSync(f, 'utf8')) as any;

describe('CRD schemas', () => {
  it('are structural: every object level has a type or is int-or-string', () => {
    const walk = (s: any, path: string): string[] => {
      if (!s || typeof s !== 'object') return [];
      const here = s.type || s['x-kubernetes-int-or-string'] ? [] : [path];
      return [
        ...here,
        ...Object.entries(s.properties ?? {}).flatMap(([k, v]) => walk(v, `${path}.${k}`)),
        ...(s.items ? walk(s.items, `${path}[]`) : []),
        ...(typeof s.additionalProperties === 'object' ? walk(s.additionalProperties, `${path}{}`) : []),
      ];
    };
    expect(walk(clusterSchema, 'StoreCluster')).toEqual([]);
    expect(walk(segmentSchema, 'StoreSegment')).toEqual([]);
  });

  it('accept the examples', () => {
    expect(checkCustomResource(load('crds/examples/storecluster.yaml'), clusterCrd)).toEqual([]);
    expect(checkCustomResource(load('crds/examples/storesegment.yaml'), segmentCrd)).toEqual([]);
  });

  it('accept the defaulted specs and the status the operator writes', () => {
    const sc = defaultStoreCluster(load('crds/examples/storecluster.yaml') as StoreCluster);
    const status = clusterStatus(
      undefined,
      {
        generation: 3,
        replicas: 3,
        leader: 'kvcache-master-1',
        masterAddress: 'kvcache-master.default.svc:50051',
        totals: { segments: 4, capacityBytes: 2 ** 38, usedBytes: 5, draining: 0 },
      },
      '2026-01-01T00:00:00Z',
    );
    expect(checkCustomResource({ ...sc, status }, clusterCrd)).toEqual([]);
    const ss = defaultStoreSegment(load('crds/examples/storesegment.yaml') as StoreSegment);
    const sstatus = segmentStatus(undefined, { generation: 1, replicas: 4, totalsError: 'connection refused' }, '2026-01-01T00:00:00Z');
    expect(checkCustomResource({ ...ss, status: sstatus }, segmentCrd)).toEqual([]);
  });

  it('reject bad values with every violation and its path', () => {
    const bad = {
      apiVersion: 'store.kvcache.io/v1alpha1',
      kind: 'StoreCluster',
      metadata: { name: 'x' },
      spec: { master: { replicas: 0, rpcPort: 'fast', allocationStrategy: 'best' }, sidecar: { globalSegmentSize: '4 gigs' }, colour: 'blue' },
    };
    expect(checkCustomResource(bad, clusterCrd)).toEqual([
      'spec.colour: unknown field',
      'spec.master.replicas: Invalid value: 0: spec.master.replicas in body should be greater than or equal to 1',
      'spec.master.rpcPort: Invalid value: "fast": spec.master.rpcPort in body must be of type integer: "string"',
      'spec.master.allocationStrategy: Unsupported value: "best": supported values: "random", "free_ratio_first", "cxl"',
      `spec.sidecar.globalSegmentSize: Invalid value: "4 gigs": spec.sidecar.globalSegmentSize in body should match '^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kKMGTPE]|[KMGT]B)?$'`,
      'spec: Invalid value: "object": metadataServer.type \'http\' is embedded in the master and has no HA: use p2p, etcd or redis when master.replicas > 1',
    ]);
    expect(checkCustomResource({ ...bad, spec: undefined }, clusterCrd)).toEqual(['spec: Required value']);
    expect(checkCustomResource({ ...bad, apiVersion: 'store.kvcache.io/v1' }, clusterCrd)[0]).toBe('apiVersion: "store.kvcache.io/v1" must be store.kvcache.io/v1alpha1');
    expect(checkCustomResource({ apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreSegment', metadata: {}, spec: { size: 5, memory: { kind: 'pmem' } } }, segmentCrd)).toEqual([
      'spec.cluster: Required value',
      'spec.memory.kind: Unsupported value: "pmem": supported values: "shm", "hugepage", "dax"',
    ]);
  });

  describe('x-kubernetes-validations rules, evaluated from the YAML', () => {
    const cluster = (spec: object) => ({ apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreCluster', metadata: { name: 'kv', namespace: 'ml' }, spec });
    const segment = (memory: object) => ({
      apiVersion: 'store.kvcache.io/v1alpha1',
      kind: 'StoreSegment',
      metadata: { name: 'pool', namespace: 'ml' },
      spec: { cluster: 'kv', size: '1Gi', memory },
    });
    /** For each rule in crds/, an object that breaks only it, and the field it is reported on. */
    const breaking: Record<string, { obj: object; field: string }> = {
      "self.metadataServer.type != 'http' || self.master.replicas == 1": { obj: cluster({ master: { replicas: 3, haBackend: { type: 'k8s' } } }), field: 'spec' },
      'self.replicas <= 1 || has(self.haBackend)': { obj: cluster({ master: { replicas: 3 }, metadataServer: { type: 'p2p' } }), field: 'spec.master' },
      "self.type == 'k8s' || has(self.connstring)": {
        obj: cluster({ master: { replicas: 3, haBackend: { type: 'etcd' } }, metadataServer: { type: 'p2p' } }),
        field: 'spec.master.haBackend',
      },
      "!(self.type == 'etcd' || self.type == 'redis') || has(self.address)": { obj: cluster({ metadataServer: { type: 'redis' } }), field: 'spec.metadataServer' },
      "self.kind != 'dax' || has(self.devicePath)": { obj: segment({ kind: 'dax' }), field: 'spec.memory' },
      "self.kind == 'dax' || !has(self.devicePath)": { obj: segment({ kind: 'shm', devicePath: '/dev/dax0.0' }), field: 'spec.memory' },
      "self.kind == 'hugepage' || !has(self.hugePageSize)": { obj: segment({ kind: 'shm', hugePageSize: '2Mi' }), field: 'spec.memory' },
    };
    const rules: { rule: string; message: string }[] = [];
    const walk = (v: unknown) => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object')
        for (const [k, x] of Object.entries(v)) {
          if (k === 'x-kubernetes-validations') rules.push(...(x as { rule: string; message: string }[]));
          else walk(x);
        }
    };
    walk(clusterSchema);
    walk(segmentSchema);

    it('every rule has a breaking case here', () => {
      expect(rules.map((r) => r.rule).sort()).toEqual(Object.keys(breaking).sort());
    });

    it.each(rules.map((r) => [r.rule, r.message]))('%s refuses an object that breaks it with its message', (rule, message) => {
      const { obj, field } = breaking[rule];
      const crd = (obj as { kind: string }).kind === 'StoreCluster' ? clusterCrd : segmentCrd;
      expect(checkCustomResource(obj, crd)).toEqual([`${field}: Invalid value: "object": ${message}`]);
    });
  });

  it('declare the status subresource, printer columns and short names', () => {
    const crd = load('crds/store.kvcache.io_storeclusters.yaml');
    const v = crd.spec.versions[0];
    expect(v.subresources.status).toEqual({});
    expect(v.additionalPrinterColumns.map((c: any) => c.name)).toEqual(['Phase', 'Leader', 'Masters', 'Segments', 'Capacity', 'Objects', 'Hit rate', 'Age']);
    // 'sc' is StorageClass's: kubectl would resolve it to the wrong kind
    expect(crd.spec.names.shortNames).toEqual(['stc']);
    const seg = load('crds/store.kvcache.io_storesegments.yaml');
    expect(seg.spec.versions[0].subresources.scale.specReplicasPath).toBe('.spec.replicas');
  });
});
