// The store-operator binary's offline commands (compiled: run `npm run build` first): render and
// inject print YAML; bad input prints a clear message and exits 2.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';

const BIN = 'dist/operator/main.js';
const cli = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
const dir = mkdtempSync(join(tmpdir(), 'store-cli-'));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe('store-operator CLI', () => {
  it('render prints the objects for a cluster and its segment as YAML', () => {
    const both = file('both.yaml', `${readFileSync('crds/examples/storecluster.yaml', 'utf8')}\n---\n${readFileSync('crds/examples/storesegment.yaml', 'utf8')}`);
    const r = cli('render', '-f', both, '--image=my/store:9');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const objs = (yaml.loadAll(r.stdout) as any[]).map((o) => `${o.kind}/${o.metadata.name}`);
    expect(objs).toEqual([
      'ServiceAccount/kvcache-master', 'Role/kvcache-master', 'RoleBinding/kvcache-master', 'ConfigMap/kvcache-master-config', 'Service/kvcache-master',
      'Service/kvcache-master-headless', 'Service/kvcache-master-metrics', 'PodDisruptionBudget/kvcache-master', 'StatefulSet/kvcache-master',
      'ConfigMap/kvcache-hugepages-store-config', 'Service/kvcache-hugepages-store', 'StatefulSet/kvcache-hugepages-store',
    ]);
    expect(r.stdout).toContain('image: my/store:9');
  });

  it('inject prints the pod as the webhook would admit it', () => {
    const r = cli('inject', '-f', 'crds/examples/inference-pod.yaml', '--cluster-file', 'crds/examples/storecluster.yaml');
    expect(r.status).toBe(0);
    const pod = yaml.load(r.stdout) as any;
    expect(pod.spec.initContainers[0]).toMatchObject({ name: 'store-sidecar', restartPolicy: 'Always' });
    expect(pod.spec.initContainers[0].args).toContain(`--global_segment_size=${16 * 2 ** 30}`);
    expect(pod.spec.containers[0].env).toContainEqual({ name: 'STORE_SIDECAR_ADDRESS', value: '127.0.0.1:50052' });
  });

  it('exits 2 with every problem of an invalid StoreCluster', () => {
    const bad = file('bad.yaml', 'apiVersion: store.kvcache.io/v1alpha1\nkind: StoreCluster\nmetadata:\n  name: kv\nspec:\n  master:\n    replicas: 3\n    allocationStrategy: best\n');
    const r = cli('render', '-f', bad);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('StoreCluster kv:');
    expect(r.stderr).toContain('spec.master.allocationStrategy: Unsupported value: "best": supported values: "random", "free_ratio_first", "cxl"');
    expect(r.stderr).toContain('spec.master: Invalid value: "object": haBackend is required when master.replicas > 1');
  });

  it('exits 2 on unreadable files, bad YAML, a segment without its cluster, and refused injections', () => {
    expect(cli('render', '-f', join(dir, 'missing.yaml'))).toMatchObject({ status: 2, stderr: expect.stringContaining('no such file') });
    expect(cli('render', '-f', file('y.yaml', 'a: [1,'))).toMatchObject({ status: 2, stderr: expect.stringContaining('not valid YAML') });
    expect(cli('render', '-f', 'crds/examples/storesegment.yaml')).toMatchObject({ status: 2, stderr: expect.stringContaining('StoreCluster "kvcache" is not in') });
    const pod = file('pod.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    store.kvcache.io/inject: "true"\n    store.kvcache.io/protocol: udp\nspec:\n  containers:\n  - name: c\n    image: i\n');
    expect(cli('inject', '-f', pod)).toMatchObject({ status: 2, stderr: expect.stringContaining('store.kvcache.io/protocol: "udp" must be tcp or rdma') });
    expect(cli('render')).toMatchObject({ status: 2, stderr: expect.stringContaining('-f FILE is required') });
    expect(cli('render', '--colour=blue')).toMatchObject({ status: 2, stderr: expect.stringContaining('unknown flag --colour') });
  });
});
