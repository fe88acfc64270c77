// The operator (dist/operator/main.js) against the test API server: it reconciles a StoreCluster
// into its StatefulSet, Services, RBAC, ConfigMap and PDB, reports status conditions, converges
// on a replica change, serves the sidecar-injection webhook that the API server calls on pod
// creation, reconciles a StoreSegment, and lets garbage collection remove what a deleted cluster
// owned. Every wait is a watch on the API server, never a sleep.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';
import { KubeApiServer, startKubeApiServer } from './kube-apiserver/http-server.js';
import { jsonPatch } from './kube-apiserver/json-patch.js';
import { writeKubeconfig } from './kube-apiserver/kubeconfig.js';
import { helmPath, run } from './kube-apiserver/kube-tools.js';
import { waitForObject, WatchStream } from './kube-apiserver/watch-client.js';
import { freePort } from './free-port.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const operatorMain = join(root, 'dist', 'operator', 'main.js');
const NS = '/api/v1/namespaces/default';
const STORE = '/apis/store.kvcache.io/v1alpha1/namespaces/default';
const CLUSTER_LABEL = 'store.kvcache.io/cluster';
const WEBHOOK_SERVICE = 'store-operator-webhook';
/** Where the operator runs (its Lease, webhook Service and TLS Secret); clusters live in default. */
const OPERATOR_NS = 'store-system';

let server: KubeApiServer;
let operator: ChildProcess;
let operatorLog = '';
let webhookPort = 0;
let kubeconfigPath = '';

type Obj = Record<string, any>;

async function call(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<{ status: number; body: Obj }> {
  const res = await fetch(server.url + path, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': contentType },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Obj };
}

async function must(method: string, path: string, body?: unknown, contentType?: string): Promise<Obj> {
  const r = await call(method, path, body, contentType);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.body.message}\noperator log:\n${operatorLog}`);
  return r.body;
}

function example(file: string): Obj {
  return yaml.load(readFileSync(join(root, 'crds', 'examples', file), 'utf8')) as Obj;
}

/** Resolves once no object of the collection matches `pred`, following DELETED events. */
async function untilNoneLeft(path: string, query: string, pred: (o: Obj) => boolean): Promise<void> {
  for (;;) {
    const list = await must('GET', `${path}?${query}`);
    const left = new Set(list.items.filter(pred).map((o: Obj) => o.metadata.name));
    if (left.size === 0) return;
    const w = new WatchStream(server.url, `${path}?${query}&resourceVersion=${list.metadata.resourceVersion}`);
    try {
      await w.next((e) => e.type === 'DELETED' && left.has(e.object.metadata.name));
    } finally {
      w.close();
    }
  }
}

function ownedBy(o: Obj, owner: Obj): boolean {
  return (o.metadata.ownerReferences ?? []).some((r: Obj) => r.uid === owner.metadata.uid && r.controller === true);
}

beforeAll(async () => {
  if (!existsSync(operatorMain)) throw new Error(`${operatorMain} is missing: run \`npm run build\` first`);
  webhookPort = await freePort();
  server = await startKubeApiServer({
    statefulSetController: true,
    resolveService: (ns, name) => (ns === OPERATOR_NS && name === WEBHOOK_SERVICE ? `127.0.0.1:${webhookPort}` : undefined),
  });
  for (const f of readdirSync(join(root, 'crds')).filter((n) => n.endsWith('.yaml'))) {
    await must('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', yaml.load(readFileSync(join(root, 'crds', f), 'utf8')));
  }
  // The chart's own webhook registration (its caBundle left for the operator to fill), rendered
  // for a release in OPERATOR_NS: checks that chart and operator agree on service, path and names.
  await must('POST', '/api/v1/namespaces', { metadata: { name: OPERATOR_NS } });
  const helm = await helmPath();
  const rendered = await run(helm, ['template', 'store', join(root, 'charts', 'store'), '--namespace', OPERATOR_NS, '--show-only', 'templates/webhook.yaml'], { HOME: tmpdir() });
  if (rendered.code !== 0) throw new Error(`helm template failed: ${rendered.stderr}`);
  const mwc = (yaml.loadAll(rendered.stdout) as Obj[]).find((d) => d?.kind === 'MutatingWebhookConfiguration');
  if (!mwc) throw new Error('charts/store renders no MutatingWebhookConfiguration');
  await must('POST', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', mwc);
  const dir = mkdtempSync(join(tmpdir(), 'operator-e2e-'));
  kubeconfigPath = writeKubeconfig(join(dir, 'kubeconfig'), server.url);
  operator = spawn(
    process.execPath,
    [
      operatorMain,
      'run',
      '--leader-elect=true',
      '--identity=op-e2e',
      `--lease-namespace=${OPERATOR_NS}`,
      `--webhook-port=${webhookPort}`,
      '--segment-stats=false',
      '--health-port=0',
    ],
    { env: { ...process.env, KUBECONFIG: kubeconfigPath }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const serving = new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      operatorLog += d.toString();
      if (/webhook serving https/.test(operatorLog)) resolve();
    };
    operator.stderr!.on('data', onData);
    operator.stdout!.on('data', onData);
    operator.once('exit', (code) => reject(new Error(`operator exited with ${code} before serving:\n${operatorLog}`)));
  });
  await serving;
});

afterAll(async () => {
  if (operator && operator.exitCode === null) {
    const exited = new Promise((r) => operator.once('exit', r));
    operator.kill('SIGTERM');
    await exited;
  }
  await server?.stop();
});

describe('StoreCluster', () => {
  let cluster: Obj;

  test('is reconciled into its StatefulSet, Services, RBAC, ConfigMap and PDB, all owned by it', async () => {
    cluster = await must('POST', `${STORE}/storeclusters`, example('storecluster.yaml'));
    const sts = await waitForObject(server.url, '/apis/apps/v1/namespaces/default/statefulsets', (o) => o.metadata.name === 'kvcache-master');
    expect(sts.spec.replicas).toBe(3);
    expect(ownedBy(sts, cluster)).toBe(true);
    await waitForObject(server.url, `${STORE}/storeclusters`, (o) => o.metadata.name === 'kvcache' && o.status?.observedGeneration === 1);
    const sel = `?labelSelector=${encodeURIComponent(`${CLUSTER_LABEL}=kvcache`)}`;
    const lists = {
      services: (await must('GET', `${NS}/services${sel}`)).items,
      serviceaccounts: (await must('GET', `${NS}/serviceaccounts${sel}`)).items,
      configmaps: (await must('GET', `${NS}/configmaps${sel}`)).items,
      roles: (await must('GET', `/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles${sel}`)).items,
      rolebindings: (await must('GET', `/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings${sel}`)).items,
      pdbs: (await must('GET', `/apis/policy/v1/namespaces/default/poddisruptionbudgets${sel}`)).items,
      secrets: (await must('GET', `${NS}/secrets${sel}`)).items,
    };
    expect(
      Object.entries(lists)
        .filter(([, items]) => items.length === 0)
        .map(([kind]) => kind),
    ).toEqual([]);
    const notOwned = Object.entries(lists).flatMap(([kind, items]) => items.filter((o: Obj) => !ownedBy(o, cluster)).map((o: Obj) => `${kind}/${o.metadata.name}`));
    expect(notOwned).toEqual([]);
    expect(lists.services.some((s: Obj) => s.spec.clusterIP === 'None')).toBe(true);
    // The cluster secret: 32 random bytes as hex, mounted into the masters with the env naming it.
    expect(lists.secrets.map((s: Obj) => s.metadata.name)).toEqual(['kvcache-cluster-secret']);
    expect(Buffer.from(lists.secrets[0].data.secret, 'base64').toString()).toMatch(/^[0-9a-f]{64}$/);
    expect(sts.spec.template.spec.containers[0].env).toContainEqual({ name: 'STORE_CLUSTER_SECRET_FILE', value: '/var/run/store/cluster-secret/secret' });
    const role = lists.roles[0];
    expect(role.rules.some((r: Obj) => (r.apiGroups ?? []).includes('coordination.k8s.io') && (r.resources ?? []).includes('leases'))).toBe(true);
    // Leader election of the operator itself runs on a Lease in this API server.
    const lease = await must('GET', `/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NS}/leases/store-operator`);
    expect(lease.spec.holderIdentity).toBe('op-e2e');
  });

  test('status conditions appear; Ready once a master holds the leader label', async () => {
    const before = await waitForObject(server.url, `${STORE}/storeclusters`, (o) => o.metadata.name === 'kvcache' && o.status?.readyMasters === 3);
    const types = (before.status.conditions ?? []).map((c: Obj) => c.type).sort();
    expect(types).toEqual(['Degraded', 'Progressing', 'Ready']);
    expect(before.status.conditions.find((c: Obj) => c.type === 'Ready').status).toBe('False');
    // What the elected master does to its own pod.
    await must('PATCH', `${NS}/pods/kvcache-master-1`, { metadata: { labels: { 'store.kvcache.io/leader': 'true' } } }, 'application/merge-patch+json');
    const ready = await waitForObject(server.url, `${STORE}/storeclusters`, (o) => o.metadata.name === 'kvcache' && o.status?.phase === 'Ready');
    expect(ready.status.leader).toBe('kvcache-master-1');
    expect(ready.status.conditions.find((c: Obj) => c.type === 'Ready')).toMatchObject({ status: 'True', observedGeneration: 1 });
  });

  test('converges when the replica count changes', async () => {
    await must('PATCH', `${STORE}/storeclusters/kvcache`, { spec: { master: { replicas: 5 } } }, 'application/merge-patch+json');
    const sts = await waitForObject(server.url, '/apis/apps/v1/namespaces/default/statefulsets', (o) => o.metadata.name === 'kvcache-master' && o.spec.replicas === 5);
    expect(sts.metadata.generation).toBe(2);
    const sc = await waitForObject(server.url, `${STORE}/storeclusters`, (o) => o.metadata.name === 'kvcache' && o.status?.observedGeneration === 2 && o.status.readyMasters === 5);
    expect(sc.status.conditions.find((c: Obj) => c.type === 'Progressing')).toMatchObject({ status: 'False', observedGeneration: 2 });
  });
});

describe('sidecar injection webhook', () => {
  test('the API server calls it on pod creation: the pod gets the sidecar, volume and env', async () => {
    const mwc = await must('GET', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/store-operator');
    expect(mwc.webhooks[0].clientConfig.caBundle).toEqual(expect.any(String));
    const pod = await must('POST', `${NS}/pods`, example('inference-pod.yaml'));
    const sidecar = (pod.spec.initContainers ?? []).find((c: Obj) => c.name === 'store-sidecar');
    const secretMount = { name: 'store-cluster-secret', mountPath: '/var/run/store/cluster-secret', readOnly: true };
    expect(sidecar).toMatchObject({ restartPolicy: 'Always', volumeMounts: [{ name: 'store-shm', mountPath: '/store-shm' }, secretMount] });
    expect(sidecar.args).toEqual(expect.arrayContaining(['--global_segment_size=17179869184', '--protocol=tcp']));
    expect(pod.spec.volumes).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'store-shm', emptyDir: expect.objectContaining({ medium: 'Memory' }) })]));
    const engine = pod.spec.containers.find((c: Obj) => c.name === 'engine');
    expect(engine.env.map((e: Obj) => e.name)).toEqual(expect.arrayContaining(['STORE_SIDECAR_ADDRESS', 'STORE_SHM_DIR', 'STORE_MASTER_ADDRESS']));
    expect(engine.volumeMounts).toEqual([{ name: 'store-shm', mountPath: '/store-shm' }, secretMount]);
    expect(engine.env).toContainEqual({ name: 'STORE_CLUSTER_SECRET_FILE', value: '/var/run/store/cluster-secret/secret' });
    expect(pod.metadata.annotations['store.kvcache.io/injected']).toEqual(expect.any(String));
  });

  test('an AdmissionReview posted directly returns a JSONPatch that yields the same pod', async () => {
    const secret = await must('GET', `/api/v1/namespaces/${OPERATOR_NS}/secrets/store-operator-webhook-tls`);
    const ca = Buffer.from(secret.data['ca.crt'], 'base64').toString('utf8');
    const pod = { ...example('inference-pod.yaml'), metadata: { ...example('inference-pod.yaml').metadata, name: 'llm-server-2' } };
    const reviewBody = JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'e2e-1',
        kind: { group: '', version: 'v1', kind: 'Pod' },
        resource: { group: '', version: 'v1', resource: 'pods' },
        namespace: 'default',
        operation: 'CREATE',
        object: pod,
      },
    });
    const answer = await new Promise<Obj>((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port: webhookPort,
          path: '/mutate-pods',
          method: 'POST',
          ca,
          headers: { 'Content-Type': 'application/json' },
          checkServerIdentity: (_h, cert) => tls.checkServerIdentity(`${WEBHOOK_SERVICE}.${OPERATOR_NS}.svc`, cert),
        },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve(JSON.parse(text)));
        },
      );
      req.on('error', reject);
      req.end(reviewBody);
    });
    expect(answer.response).toMatchObject({ uid: 'e2e-1', allowed: true, patchType: 'JSONPatch' });
    const patched = jsonPatch(pod, JSON.parse(Buffer.from(answer.response.patch, 'base64').toString('utf8')));
    const viaServer = await must('GET', `${NS}/pods/llm-server`);
    expect(patched.spec).toEqual({ ...viaServer.spec });
    expect(patched.metadata.annotations).toEqual(viaServer.metadata.annotations);
  });

  test('a pod naming a missing StoreCluster is denied with the webhook message', async () => {
    const pod = example('inference-pod.yaml');
    pod.metadata.name = 'orphan';
    pod.metadata.annotations['store.kvcache.io/cluster'] = 'nope';
    const r = await call('POST', `${NS}/pods`, pod);
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.body.message).toMatch(/admission webhook "inject\.store\.kvcache\.io" denied the request: .*StoreCluster default\/nope not found/);
    expect((await call('GET', `${NS}/pods/orphan`)).status).toBe(404);
  });
});

describe('StoreSegment', () => {
  test('is reconciled into a store-service StatefulSet it owns, with status', async () => {
    const seg = await must('POST', `${STORE}/storesegments`, example('storesegment.yaml'));
    const sts = await waitForObject(server.url, '/apis/apps/v1/namespaces/default/statefulsets', (o) => ownedBy(o, seg));
    expect(sts.spec.replicas).toBe(4);
    const done = await waitForObject(
      server.url,
      `${STORE}/storesegments`,
      (o) => o.metadata.name === seg.metadata.name && o.status?.observedGeneration === 1 && (o.status.conditions ?? []).length > 0,
    );
    expect(done.status.conditions.map((c: Obj) => c.type)).toEqual(expect.arrayContaining(['Ready', 'Progressing']));
  });
});

describe('spec.tls', () => {
  test('the API server checks it; the masters get --tls_* from the mounted Secret and probe over HTTPS; the cluster secret is made', async () => {
    const base = { apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreCluster', metadata: { name: 'kvtls', namespace: 'default' } };
    const bad = await call('POST', `${STORE}/storeclusters`, { ...base, spec: { tls: { clientCertificates: true } } });
    expect(bad.status).toBe(422);
    expect(JSON.stringify(bad.body)).toContain('secretName');
    const sc = await must('POST', `${STORE}/storeclusters`, { ...base, spec: { tls: { secretName: 'kvtls-tls' } } });
    const sts = await waitForObject(server.url, '/apis/apps/v1/namespaces/default/statefulsets', (o) => o.metadata.name === 'kvtls-master');
    const c = sts.spec.template.spec.containers[0];
    expect(c.args).toEqual(expect.arrayContaining(['--tls_cert=/var/run/store/tls/tls.crt', '--tls_key=/var/run/store/tls/tls.key']));
    expect(c.readinessProbe.httpGet).toMatchObject({ path: '/health', scheme: 'HTTPS' });
    expect(sts.spec.template.spec.volumes).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'store-tls', secret: expect.objectContaining({ secretName: 'kvtls-tls' }) })]),
    );
    const secret = await waitForObject(server.url, `${NS}/secrets`, (o) => o.metadata.name === 'kvtls-cluster-secret');
    expect(ownedBy(secret, sc)).toBe(true);
    await must('DELETE', `${STORE}/storeclusters/kvtls`);
  });
});

describe('watch expiry', () => {
  test('after its watches end and the history is compacted (410), the operator re-lists and still converges', async () => {
    server.store.compact();
    server.closeWatches();
    await must('PATCH', `${STORE}/storeclusters/kvcache`, { spec: { master: { replicas: 2 } } }, 'application/merge-patch+json');
    const sc = await waitForObject(server.url, `${STORE}/storeclusters`, (o) => o.metadata.name === 'kvcache' && o.status?.observedGeneration === 3 && o.status.readyMasters === 2);
    expect(sc.spec.master.replicas).toBe(2);
    const sts = await must('GET', '/apis/apps/v1/namespaces/default/statefulsets/kvcache-master');
    expect(sts.spec.replicas).toBe(2);
  });
});

describe('deletion', () => {
  test('deleting the StoreCluster garbage-collects everything it owned', async () => {
    const sc = await must('GET', `${STORE}/storeclusters/kvcache`);
    const w = new WatchStream(server.url, `${STORE}/storeclusters?resourceVersion=${sc.metadata.resourceVersion}`);
    await must('DELETE', `${STORE}/storeclusters/kvcache`);
    await w.next((e) => e.type === 'DELETED' && e.object.metadata.uid === sc.metadata.uid);
    w.close();
    expect((await call('GET', `${STORE}/storeclusters/kvcache`)).status).toBe(404);
    // Garbage collection runs in the background (and also catches dependents an in-flight
    // reconcile pass created after the owner was gone): await each collection emptying.
    const sel = `labelSelector=${encodeURIComponent(`${CLUSTER_LABEL}=kvcache`)}`;
    for (const path of [
      `${NS}/services`,
      `${NS}/configmaps`,
      `${NS}/serviceaccounts`,
      `${NS}/secrets`,
      '/apis/apps/v1/namespaces/default/statefulsets',
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles',
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings',
      '/apis/policy/v1/namespaces/default/poddisruptionbudgets',
    ]) {
      await untilNoneLeft(path, sel, (o) => ownedBy(o, sc));
    }
    await untilNoneLeft(`${NS}/pods`, sel, (p) => p.metadata.name.startsWith('kvcache-master-'));
    expect((await must('GET', `${STORE}/storeclusters`)).items.map((o: Obj) => o.metadata.name)).toEqual([]);
  });
});

describe('operator failover', () => {
  test('a standby replica takes the Lease when the leader stops, and reconciles', async () => {
    const standby = spawn(
      process.execPath,
      [operatorMain, 'run', '--leader-elect=true', '--identity=op-standby', `--lease-namespace=${OPERATOR_NS}`, '--webhook=false', '--segment-stats=false', '--health-port=0'],
      { env: { ...process.env, KUBECONFIG: kubeconfigPath }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let standbyLog = '';
    standby.stderr.on('data', (d: Buffer) => (standbyLog += d.toString()));
    try {
      const exited = new Promise((r) => operator.once('exit', r));
      operator.kill('SIGTERM');
      // A leader shutting down releases the Lease and exits cleanly (it used to take its own
      // release for a lost leadership and exit 1).
      expect(await exited).toBe(0);
      expect(operatorLog).not.toContain('lost leadership');
      const lease = await waitForObject(
        server.url,
        `/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NS}/leases`,
        (o) => o.metadata.name === 'store-operator' && o.spec?.holderIdentity === 'op-standby',
      );
      expect(lease.spec.holderIdentity).toBe('op-standby');
      const sc = await must('POST', `${STORE}/storeclusters`, { ...example('storecluster.yaml'), metadata: { name: 'second', namespace: 'default' } });
      const sts = await waitForObject(server.url, '/apis/apps/v1/namespaces/default/statefulsets', (o) => ownedBy(o, sc));
      expect(sts.metadata.name).toBe('second-master');
    } catch (e) {
      throw new Error(`${(e as Error).message}\nstandby log:\n${standbyLog}`);
    } finally {
      const gone = new Promise((r) => standby.once('exit', r));
      standby.kill('SIGTERM');
      await gone;
    }
  });
});
