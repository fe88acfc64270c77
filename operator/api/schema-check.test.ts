// The CRD schemas accept the examples and what the operator itself writes (defaulted specs,
// computed status), and reject bad objects with every violation listed.
import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { checkSchema, loadCrdSchemas } from './schema-check.js';
import { defaultStoreCluster, defaultStoreSegment } from './defaults.js';
import { clusterStatus, segmentStatus } from '../reconcile/status.js';
import type { StoreCluster, StoreSegment } from '../gen/index.js';

const crds = loadCrdSchemas();
const clusterSchema = crds.get('StoreCluster')!.schema;
const segmentSchema = crds.get('StoreSegment')!.schema;
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
    expect(checkSchema(load('crds/examples/storecluster.yaml'), clusterSchema)).toEqual([]);
    expect(checkSchema(load('crds/examples/storesegment.yaml'), segmentSchema)).toEqual([]);
  });

  it('accept the defaulted specs and the status the operator writes', () => {
    const sc = defaultStoreCluster(load('crds/examples/storecluster.yaml') as StoreCluster);
    const status = clusterStatus(undefined, { generation: 3, replicas: 3, leader: 'kvcache-master-1', masterAddress: 'kvcache-master.default.svc:50051', totals: { segments: 4, capacityBytes: 2 ** 38, usedBytes: 5 } }, '2026-01-01T00:00:00Z');
    expect(checkSchema({ ...sc, status }, clusterSchema)).toEqual([]);
    const ss = defaultStoreSegment(load('crds/examples/storesegment.yaml') as StoreSegment);
    const sstatus = segmentStatus(undefined, { generation: 1, replicas: 4, totalsError: 'connection refused' }, '2026-01-01T00:00:00Z');
    expect(checkSchema({ ...ss, status: sstatus }, segmentSchema)).toEqual([]);
  });

  it('reject bad values with every violation and its path', () => {
    const bad = {
      apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreCluster', metadata: { name: 'x' },
      spec: { master: { replicas: 0, rpcPort: 'fast', allocationStrategy: 'best' }, sidecar: { globalSegmentSize: '4 gigs' }, colour: 'blue' },
    };
    expect(checkSchema(bad, clusterSchema)).toEqual([
      'spec.master.replicas: 0 is less than the minimum 1',
      'spec.master.rpcPort: must be an integer, got "fast"',
      'spec.master.allocationStrategy: "best" is not one of "random", "free_ratio_first", "cxl"',
      `spec.sidecar.globalSegmentSize: "4 gigs" does not match ^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kKMGTPE]|[KMGT]B)?$`,
      'spec.colour: unknown field',
    ]);
    expect(checkSchema({ ...bad, spec: undefined }, clusterSchema)).toEqual(['spec: required']);
    expect(checkSchema({ apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreSegment', metadata: {}, spec: { size: 5, memory: { kind: 'pmem' } } }, segmentSchema)).toEqual([
      'spec.cluster: required',
      'spec.memory.kind: "pmem" is not one of "shm", "hugepage", "dax"',
    ]);
  });

  it('state the cross-field rules as CEL with the same meaning as validation.ts', () => {
    const raw = readFileSync('crds/store.kvcache.io_storeclusters.yaml', 'utf8');
    expect(raw).toContain(`rule: "self.replicas <= 1 || has(self.haBackend)"`);
    expect(raw).toContain(`rule: "self.metadataServer.type != 'http' || self.master.replicas == 1"`);
    expect(readFileSync('crds/store.kvcache.io_storesegments.yaml', 'utf8')).toContain(`rule: "self.kind != 'dax' || has(self.devicePath)"`);
  });

  it('declare the status subresource, printer columns and short names', () => {
    const crd = load('crds/store.kvcache.io_storeclusters.yaml');
    const v = crd.spec.versions[0];
    expect(v.subresources.status).toEqual({});
    expect(v.additionalPrinterColumns.map((c: any) => c.name)).toEqual(['Phase', 'Leader', 'Masters', 'Segments', 'Capacity', 'Age']);
    expect(crd.spec.names.shortNames).toContain('sc');
    const seg = load('crds/store.kvcache.io_storesegments.yaml');
    expect(seg.spec.versions[0].subresources.scale.specReplicasPath).toBe('.spec.replicas');
  });
});
