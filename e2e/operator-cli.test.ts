// The store-operator binary's offline commands (compiled: run `npm run build` first): render and
// inject print YAML; bad input prints a clear message and exits 2.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';

const BIN = 'dist/operator/main.js';
const cli = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
const cliEnv = (env: NodeJS.ProcessEnv, ...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env, timeout: 20_000 });
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
      'ServiceAccount/kvcache-master',
      'Role/kvcache-master',
      'RoleBinding/kvcache-master',
      'ConfigMap/kvcache-master-config',
      'Service/kvcache-master',
      'Service/kvcache-master-headless',
      'Service/kvcache-master-metrics',
      'PodDisruptionBudget/kvcache-master',
      'StatefulSet/kvcache-master',
      'NetworkPolicy/kvcache-master',
      'ConfigMap/kvcache-hugepages-store-config',
      'Service/kvcache-hugepages-store',
      'StatefulSet/kvcache-hugepages-store',
      'NetworkPolicy/kvcache-hugepages-store',
    ]);
    expect(r.stdout).toContain('image: my/store:9');
    // the policies as the API server reads them: `from`, not the client library's `_from`
    const policy = (yaml.loadAll(r.stdout) as any[]).find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'kvcache-master');
    expect(policy.spec.ingress[0].from).toEqual([
      { podSelector: { matchLabels: { 'store.kvcache.io/cluster': 'kvcache' } } },
      { namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'store-operator' } } },
    ]);
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
    const bad = file(
      'bad.yaml',
      'apiVersion: store.kvcache.io/v1alpha1\nkind: StoreCluster\nmetadata:\n  name: kv\nspec:\n  master:\n    replicas: 3\n    allocationStrategy: best\n',
    );
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
    expect(cli('render', '-f', 'crds/examples/storesegment.yaml')).toMatchObject({
      status: 2,
      stderr: expect.stringContaining('StoreCluster "kvcache" (namespace default) is not among crds/examples/storesegment.yaml'),
    });
    const pod = file(
      'pod.yaml',
      'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    store.kvcache.io/inject: "true"\n    store.kvcache.io/protocol: udp\nspec:\n  containers:\n  - name: c\n    image: i\n',
    );
    expect(cli('inject', '-f', pod, '--cluster-file', 'crds/examples/storecluster.yaml')).toMatchObject({
      status: 2,
      stderr: expect.stringContaining('store.kvcache.io/protocol: "udp" must be tcp or rdma'),
    });
    expect(cli('render')).toMatchObject({ status: 2, stderr: expect.stringContaining('-f FILE is required') });
    expect(cli('render', '--colour=blue')).toMatchObject({ status: 2, stderr: expect.stringContaining('unknown flag --colour') });
  });

  it('render takes several -f and directories, and finds the cluster of a segment among them or in --cluster-file', () => {
    const d = join(dir, 'manifests');
    mkdirSync(d);
    writeFileSync(join(d, 'a-cluster.yaml'), readFileSync('crds/examples/storecluster.yaml', 'utf8'));
    writeFileSync(join(d, 'README.txt'), 'not a manifest');
    const kinds = (out: string) => (yaml.loadAll(out) as any[]).map((o) => `${o.kind}/${o.metadata.name}`);
    const fromDir = cli('render', '-f', d, '-f', 'crds/examples/storesegment.yaml');
    expect(fromDir.stderr).toBe('');
    expect(kinds(fromDir.stdout)).toContain('StatefulSet/kvcache-master');
    expect(kinds(fromDir.stdout)).toContain('StatefulSet/kvcache-hugepages-store');
    // the cluster as context only: the segment's objects, not the cluster's
    const ctx = cli('render', '-f', 'crds/examples/storesegment.yaml', '--cluster-file', 'crds/examples/storecluster.yaml');
    expect(ctx.status).toBe(0);
    expect(kinds(ctx.stdout)).toEqual([
      'ConfigMap/kvcache-hugepages-store-config',
      'Service/kvcache-hugepages-store',
      'StatefulSet/kvcache-hugepages-store',
      'NetworkPolicy/kvcache-hugepages-store',
    ]);
    expect(cli('render', '-f', join(dir, 'empty-dir-does-not-exist'))).toMatchObject({ status: 2, stderr: expect.stringContaining('no such file') });
  });

  it('inject never assumes a cluster: without one among the inputs or --cluster-file it exits 2', () => {
    const r = cli('inject', '-f', 'crds/examples/inference-pod.yaml');
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('no StoreCluster among crds/examples/inference-pod.yaml');
    const both = cli('inject', '-f', 'crds/examples/storecluster.yaml', '-f', 'crds/examples/inference-pod.yaml');
    expect(both.status).toBe(0);
    expect((yaml.loadAll(both.stdout) as any[]).map((o) => o.kind)).toEqual(['Pod']);
  });

  it('run without a reachable configuration says so in one line and exits 2', () => {
    const base = { PATH: process.env.PATH, HOME: dir };
    const none = cliEnv(base, 'run');
    expect(none).toMatchObject({ status: 2, stdout: '' });
    expect(none.stderr).toBe(
      'store-operator: no Kubernetes API server configured: run in a cluster, set KUBECONFIG or create ~/.kube/config (render and inject work offline without one)\n',
    );
    const missing = cliEnv({ ...base, KUBECONFIG: join(dir, 'nope') }, 'run');
    expect(missing).toMatchObject({ status: 2, stderr: `store-operator: KUBECONFIG names ${join(dir, 'nope')}, which does not exist\n` });
    const garbage = cliEnv({ ...base, KUBECONFIG: file('garbage.kubeconfig', 'clusters: [1, 2') }, 'run');
    expect(garbage.status).toBe(2);
    expect(garbage.stderr).toMatch(/^store-operator: KUBECONFIG=.*garbage.kubeconfig: not a usable kubeconfig: .*\n$/);
    const noContext = cliEnv({ ...base, KUBECONFIG: file('empty.kubeconfig', 'apiVersion: v1\nkind: Config\nclusters: []\n') }, 'run');
    expect(noContext).toMatchObject({ status: 2, stderr: expect.stringContaining('no current context with a cluster server') });
  });
});
