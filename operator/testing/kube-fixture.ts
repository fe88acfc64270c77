// Test support only: an in-process test API server (e2e/kube-apiserver, real HTTP and watches)
// with the project's CRDs and a namespace, and a KubeConfig that points @kubernetes/client-node
// at it.
import { readdirSync, readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { startKubeApiServer, type KubeApiServer, type KubeApiServerOptions } from '../../e2e/kube-apiserver/http-server.js';
import { kubeconfigYaml } from '../../e2e/kube-apiserver/kubeconfig.js';

export interface KubeFixture {
  server: KubeApiServer;
  kc: KubeConfig;
  /** A raw request to the server (to set up or inspect state without the client under test). */
  call(method: string, path: string, body?: unknown, contentType?: string): Promise<{ status: number; body: any }>;
}

export async function startKubeFixture(namespace: string, opts: KubeApiServerOptions = {}): Promise<KubeFixture> {
  const server = await startKubeApiServer(opts);
  const kc = new KubeConfig();
  kc.loadFromString(kubeconfigYaml(server.url, namespace));
  const call = async (method: string, path: string, body?: unknown, contentType = 'application/json') => {
    const res = await fetch(server.url + path, {
      method,
      headers: body === undefined ? {} : { 'Content-Type': contentType },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  const dir = new URL('../../crds/', import.meta.url);
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.yaml'))) {
    const r = await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', yaml.load(readFileSync(new URL(f, dir), 'utf8')));
    if (r.status !== 201) throw new Error(`CRD ${f}: ${r.status} ${r.body.message}`);
  }
  const r = await call('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  if (r.status !== 201) throw new Error(`namespace ${namespace}: ${r.status} ${r.body.message}`);
  return { server, kc, call };
}
