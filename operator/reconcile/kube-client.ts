// A small Kubernetes REST client for the kinds the operator touches: get, list, create, merge
// patch (object and status), delete and watch (newline-delimited JSON events). Authentication
// and TLS come from @kubernetes/client-node's KubeConfig (in-cluster or KUBECONFIG); the paths
// come from a fixed table, so no discovery round trips are needed.
import * as http from 'node:http';
import * as https from 'node:https';
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { GROUP, VERSION } from '../api/constants.js';

export interface ResourceInfo {
  apiVersion: string;
  plural: string;
  namespaced: boolean;
}

export const RESOURCES: Record<string, ResourceInfo> = {
  ConfigMap: { apiVersion: 'v1', plural: 'configmaps', namespaced: true },
  Secret: { apiVersion: 'v1', plural: 'secrets', namespaced: true },
  Service: { apiVersion: 'v1', plural: 'services', namespaced: true },
  ServiceAccount: { apiVersion: 'v1', plural: 'serviceaccounts', namespaced: true },
  Pod: { apiVersion: 'v1', plural: 'pods', namespaced: true },
  Event: { apiVersion: 'v1', plural: 'events', namespaced: true },
  StatefulSet: { apiVersion: 'apps/v1', plural: 'statefulsets', namespaced: true },
  Role: { apiVersion: 'rbac.authorization.k8s.io/v1', plural: 'roles', namespaced: true },
  RoleBinding: { apiVersion: 'rbac.authorization.k8s.io/v1', plural: 'rolebindings', namespaced: true },
  PodDisruptionBudget: { apiVersion: 'policy/v1', plural: 'poddisruptionbudgets', namespaced: true },
  Lease: { apiVersion: 'coordination.k8s.io/v1', plural: 'leases', namespaced: true },
  MutatingWebhookConfiguration: { apiVersion: 'admissionregistration.k8s.io/v1', plural: 'mutatingwebhookconfigurations', namespaced: false },
  StoreCluster: { apiVersion: `${GROUP}/${VERSION}`, plural: 'storeclusters', namespaced: true },
  StoreSegment: { apiVersion: `${GROUP}/${VERSION}`, plural: 'storesegments', namespaced: true },
};

export class KubeApiError extends Error {
  constructor(readonly status: number, readonly reason: string, message: string) {
    super(message);
    this.name = 'KubeApiError';
  }
  get notFound() { return this.status === 404; }
  get conflict() { return this.status === 409; }
  get gone() { return this.status === 410; }
}

export interface Ref {
  kind: string;
  namespace?: string;
  name?: string;
}

export interface WatchEvent<T = KubernetesObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export interface ListResult<T> {
  items: T[];
  resourceVersion: string;
}

/** What the reconcilers need from the API server (tests of the loop can provide another). */
export interface KubeApi {
  get<T extends KubernetesObject>(ref: Ref): Promise<T | undefined>;
  list<T extends KubernetesObject>(ref: Ref, labelSelector?: string): Promise<ListResult<T>>;
  create<T extends KubernetesObject>(obj: T): Promise<T>;
  replace<T extends KubernetesObject>(obj: T): Promise<T>;
  mergePatch<T extends KubernetesObject>(ref: Ref, patch: unknown, subresource?: 'status'): Promise<T>;
  delete(ref: Ref): Promise<void>;
  watch(ref: Ref, resourceVersion: string, onEvent: (e: WatchEvent) => void, signal: AbortSignal): Promise<void>;
}

export function resourcePath(ref: Ref, resource?: ResourceInfo): string {
  const info = resource ?? RESOURCES[ref.kind];
  if (!info) throw new Error(`kube client: unknown kind ${ref.kind}`);
  const base = info.apiVersion.includes('/') ? `/apis/${info.apiVersion}` : `/api/${info.apiVersion}`;
  const ns = info.namespaced && ref.namespace ? `/namespaces/${encodeURIComponent(ref.namespace)}` : '';
  return `${base}${ns}/${info.plural}${ref.name ? `/${encodeURIComponent(ref.name)}` : ''}`;
}

export class KubeClient implements KubeApi {
  private readonly server: URL;
  constructor(private readonly kc: KubeConfig) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kube client: the kubeconfig has no current cluster');
    this.server = new URL(cluster.server);
  }

  private async options(method: string, path: string, headers: Record<string, string>): Promise<https.RequestOptions> {
    const opts: https.RequestOptions = { method, headers: { Accept: 'application/json', ...headers } };
    await this.kc.applyToHTTPSOptions(opts);
    const url = new URL(this.server.pathname.replace(/\/$/, '') + path, this.server);
    opts.protocol = url.protocol;
    opts.hostname = url.hostname;
    opts.port = url.port;
    opts.path = url.pathname + url.search;
    if (url.protocol === 'http:') delete opts.agent; // the kubeconfig's TLS agent does not apply
    return opts;
  }

  private async request<T>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const opts = await this.options(method, path, payload ? { 'Content-Type': contentType, 'Content-Length': String(payload.length) } : {});
    return new Promise<T>((resolve, reject) => {
      const req = (opts.protocol === 'http:' ? http : https).request(opts, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: any;
          try {
            parsed = text ? JSON.parse(text) : {};
          } catch {
            parsed = { message: text };
          }
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) resolve(parsed as T);
          else reject(new KubeApiError(status, parsed?.reason ?? '', `${method} ${path}: ${status} ${parsed?.message ?? text}`));
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  private refOf(obj: KubernetesObject): Ref {
    return { kind: obj.kind ?? '', namespace: obj.metadata?.namespace, name: obj.metadata?.name };
  }

  async get<T extends KubernetesObject>(ref: Ref): Promise<T | undefined> {
    try {
      return await this.request<T>('GET', resourcePath(ref));
    } catch (e) {
      if (e instanceof KubeApiError && e.notFound) return undefined;
      throw e;
    }
  }

  async list<T extends KubernetesObject>(ref: Ref, labelSelector?: string): Promise<ListResult<T>> {
    const q = labelSelector ? `?labelSelector=${encodeURIComponent(labelSelector)}` : '';
    const list = await this.request<{ items?: T[]; metadata?: { resourceVersion?: string } }>('GET', resourcePath({ kind: ref.kind, namespace: ref.namespace }) + q);
    const info = RESOURCES[ref.kind];
    // List items carry no kind/apiVersion; restore them so callers can treat them as objects.
    const items = (list.items ?? []).map((i) => ({ apiVersion: info.apiVersion, kind: ref.kind, ...i }));
    return { items, resourceVersion: list.metadata?.resourceVersion ?? '' };
  }

  create<T extends KubernetesObject>(obj: T): Promise<T> {
    const ref = this.refOf(obj);
    return this.request<T>('POST', resourcePath({ kind: ref.kind, namespace: ref.namespace }), obj);
  }

  replace<T extends KubernetesObject>(obj: T): Promise<T> {
    return this.request<T>('PUT', resourcePath(this.refOf(obj)), obj);
  }

  mergePatch<T extends KubernetesObject>(ref: Ref, patch: unknown, subresource?: 'status'): Promise<T> {
    return this.request<T>('PATCH', resourcePath(ref) + (subresource ? `/${subresource}` : ''), patch, 'application/merge-patch+json');
  }

  async delete(ref: Ref): Promise<void> {
    try {
      await this.request('DELETE', resourcePath(ref), { propagationPolicy: 'Background' });
    } catch (e) {
      if (!(e instanceof KubeApiError && e.notFound)) throw e;
    }
  }

  /** Streams watch events until the server ends the watch, an error occurs, or `signal` aborts. */
  async watch(ref: Ref, resourceVersion: string, onEvent: (e: WatchEvent) => void, signal: AbortSignal): Promise<void> {
    const q = new URLSearchParams({ watch: 'true', allowWatchBookmarks: 'true', resourceVersion, timeoutSeconds: '300' });
    const opts = await this.options('GET', `${resourcePath({ kind: ref.kind, namespace: ref.namespace })}?${q}`, {});
    opts.signal = signal;
    await new Promise<void>((resolve, reject) => {
      const req = (opts.protocol === 'http:' ? http : https).request(opts, (res) => {
        if ((res.statusCode ?? 0) >= 300) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            let msg = Buffer.concat(chunks).toString('utf8');
            try { msg = JSON.parse(msg).message ?? msg; } catch { /* keep text */ }
            reject(new KubeApiError(res.statusCode ?? 0, '', `watch ${ref.kind}: ${res.statusCode} ${msg}`));
          });
          return;
        }
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buf += chunk;
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (!line) continue;
            try {
              onEvent(JSON.parse(line) as WatchEvent);
            } catch (e) {
              req.destroy(e as Error);
              return;
            }
          }
        });
        res.on('end', () => resolve());
        res.on('error', (e) => (signal.aborted ? resolve() : reject(e)));
      });
      req.on('error', (e) => (signal.aborted ? resolve() : reject(e)));
      req.end();
    });
  }
}
