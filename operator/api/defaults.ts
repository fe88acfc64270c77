// Pure defaulting of StoreCluster and StoreSegment objects, shared by the reconciler, the webhook
// and the offline CLI: the same values the CRD schemas default, plus those that depend on the
// operator (image) or on the object (clusterId = name). Never mutates its input.
import type { StoreCluster, StoreClusterSpec, StoreSegment, StoreSegmentSpec } from '../gen/index.js';
import { DEFAULT_IMAGE } from './constants.js';

type Master = NonNullable<StoreClusterSpec['master']>;
type MetadataServer = NonNullable<StoreClusterSpec['metadataServer']>;
type Sidecar = NonNullable<StoreClusterSpec['sidecar']>;
type Memory = NonNullable<StoreSegmentSpec['memory']>;

export type DefaultedMaster = Master & Required<Pick<Master, 'replicas' | 'rpcPort' | 'metricsPort' | 'allocationStrategy'>>;
export type DefaultedSidecar = Sidecar & Required<Pick<Sidecar, 'image' | 'globalSegmentSize' | 'localBufferSize' | 'protocol' | 'httpPort' | 'rpcPort'>>;
export interface DefaultedStoreCluster extends StoreCluster {
  metadata: StoreCluster['metadata'] & { name: string; namespace: string };
  spec: StoreClusterSpec & {
    image: string;
    imagePullPolicy: NonNullable<StoreClusterSpec['imagePullPolicy']>;
    clusterId: string;
    master: DefaultedMaster;
    metadataServer: MetadataServer & Required<Pick<MetadataServer, 'type' | 'port'>>;
    sidecar: DefaultedSidecar;
  };
}
export interface DefaultedStoreSegment extends StoreSegment {
  metadata: StoreSegment['metadata'] & { name: string; namespace: string };
  spec: StoreSegmentSpec & {
    replicas: number;
    memory: Memory & Required<Pick<Memory, 'kind'>>;
    protocol: NonNullable<StoreSegmentSpec['protocol']>;
    httpPort: number;
  };
}

export interface OperatorDefaults {
  /** Image used when the CR names none (the operator's --image). */
  image: string;
  /** Namespace assumed for objects read from a file without one. */
  namespace: string;
}
export const operatorDefaults: OperatorDefaults = { image: DEFAULT_IMAGE, namespace: 'default' };

export function defaultStoreCluster(sc: StoreCluster, d: OperatorDefaults = operatorDefaults): DefaultedStoreCluster {
  const spec = sc.spec ?? {};
  const name = sc.metadata?.name ?? '';
  const image = spec.image ?? d.image;
  const master = spec.master ?? {};
  return {
    ...sc,
    metadata: { ...sc.metadata, name, namespace: sc.metadata?.namespace ?? d.namespace },
    spec: {
      ...spec,
      image,
      imagePullPolicy: spec.imagePullPolicy ?? 'IfNotPresent',
      clusterId: spec.clusterId ?? name,
      master: {
        ...master,
        replicas: master.replicas ?? 1,
        rpcPort: master.rpcPort ?? 50051,
        metricsPort: master.metricsPort ?? 9003,
        allocationStrategy: master.allocationStrategy ?? 'random',
        ...(master.haBackend ? { haBackend: { ...master.haBackend, type: master.haBackend.type ?? 'k8s' } } : {}),
      },
      metadataServer: { ...spec.metadataServer, type: spec.metadataServer?.type ?? 'http', port: spec.metadataServer?.port ?? 8080 },
      sidecar: {
        ...spec.sidecar,
        image: spec.sidecar?.image ?? image,
        globalSegmentSize: spec.sidecar?.globalSegmentSize ?? '4Gi',
        localBufferSize: spec.sidecar?.localBufferSize ?? '1Gi',
        protocol: spec.sidecar?.protocol ?? 'tcp',
        httpPort: spec.sidecar?.httpPort ?? 8080,
        rpcPort: spec.sidecar?.rpcPort ?? 50052,
      },
    },
  };
}

export function defaultStoreSegment(ss: StoreSegment, d: OperatorDefaults = operatorDefaults): DefaultedStoreSegment {
  const spec = ss.spec ?? ({} as StoreSegmentSpec);
  const memory = spec.memory ?? {};
  const kind = memory.kind ?? 'shm';
  return {
    ...ss,
    metadata: { ...ss.metadata, name: ss.metadata?.name ?? '', namespace: ss.metadata?.namespace ?? d.namespace },
    spec: {
      ...spec,
      replicas: spec.replicas ?? 1,
      memory: { ...memory, kind, ...(kind === 'hugepage' ? { hugePageSize: memory.hugePageSize ?? '2Mi' } : {}) },
      protocol: spec.protocol ?? 'tcp',
      httpPort: spec.httpPort ?? 8080,
    },
  };
}
