// Every pod the operator renders, and the sidecar it injects, passes the `restricted` Pod
// Security Standard; a dax segment is the one that cannot (host device, privileged) and says so.
import type { V1Pod, V1PodSpec, V1StatefulSet } from '@kubernetes/client-node';
import { defaultStoreCluster, defaultStoreSegment } from '../api/defaults.js';
import { restrictedViolations } from '../testing/pod-security.js';
import { mutatePod } from '../webhook/admission.js';
import { applyPatch } from '../webhook/json-patch.js';
import { renderCluster, renderSegment } from './render.js';

const cluster = (spec = {}) => defaultStoreCluster({ apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreCluster', metadata: { name: 'kv', namespace: 'ml', uid: 'u' }, spec });
const segment = (memory: object) =>
  defaultStoreSegment({
    apiVersion: 'store.kvcache.io/v1alpha1',
    kind: 'StoreSegment',
    metadata: { name: 'pool', namespace: 'ml', uid: 's' },
    spec: { cluster: 'kv', size: '4Gi', memory },
  });
const podSpecs = (objs: { kind?: string }[]) => objs.filter((o) => o.kind === 'StatefulSet').map((o) => (o as V1StatefulSet).spec!.template.spec!);

describe('pod security', () => {
  it('the masters pass the restricted standard, single and HA', () => {
    for (const spec of [{}, { master: { replicas: 3, haBackend: { type: 'k8s' } } }]) {
      const [pod] = podSpecs(renderCluster(cluster(spec)).desired);
      expect(restrictedViolations(pod)).toEqual([]);
    }
  });

  it('shm and huge-page segments pass the restricted standard', () => {
    for (const memory of [{ kind: 'shm' }, { kind: 'hugepage', hugePageSize: '2Mi' }]) {
      const [pod] = podSpecs(renderSegment(segment(memory), cluster()).desired);
      expect(restrictedViolations(pod)).toEqual([]);
    }
  });

  it('a dax segment needs the privileged standard: a host device and a privileged container', () => {
    const [pod] = podSpecs(renderSegment(segment({ kind: 'dax', devicePath: '/dev/dax0.0' }), cluster()).desired);
    expect(restrictedViolations(pod)).toEqual(expect.arrayContaining(['volume segment is of type hostPath', 'container store-service is privileged']));
  });

  it('the injected sidecar keeps a restricted pod restricted', () => {
    const app: V1PodSpec = {
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{ name: 'engine', image: 'vllm', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
    };
    expect(restrictedViolations(app)).toEqual([]);
    const pod: V1Pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'ml', annotations: { 'store.kvcache.io/inject': 'true' } }, spec: app };
    const result = mutatePod(pod, 'ml', () => cluster());
    expect(result.denied).toBeUndefined();
    const injected = applyPatch(pod, result.patch);
    expect(injected.spec!.initContainers!.map((c) => c.name)).toContain('store-sidecar');
    expect(restrictedViolations(injected.spec!)).toEqual([]);
  });

  it('the checker finds what the standard refuses', () => {
    const bad: V1PodSpec = {
      hostNetwork: true,
      volumes: [{ name: 'h', hostPath: { path: '/' } }],
      containers: [{ name: 'c', image: 'i', ports: [{ containerPort: 80, hostPort: 80 }], securityContext: { runAsUser: 0, capabilities: { add: ['SYS_ADMIN'] } } }],
    };
    expect(restrictedViolations(bad)).toEqual([
      'host namespaces (hostNetwork, hostPID or hostIPC) are used',
      'volume h is of type hostPath',
      'container c does not set allowPrivilegeEscalation: false',
      'container c does not run as non-root (runAsNonRoot)',
      'container c runs as uid 0',
      'container c has no RuntimeDefault or Localhost seccomp profile',
      'container c does not drop ALL capabilities',
      'container c adds capability SYS_ADMIN',
      'container c uses host port 80',
    ]);
  });
});
