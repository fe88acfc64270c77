// Test support only (used by *.test.ts, never by the operator): an in-memory KubeApi with the
// API server behaviours the reconcilers rely on: uid/resourceVersion/generation on create, 409
// on duplicate create and on a stale resourceVersion in replace, JSON merge patch with null
// deletion, the status subresource, equality label selectors. It records every write.
import type { KubernetesObject } from '@kubernetes/client-node';
import mergePatchLib from 'json-merge-patch';
import { KubeApiError, type KubeApi, type ListResult, type Ref } from '../reconcile/kube-client.js';

/** JSON merge patch (RFC 7386, json-merge-patch) on a copy of `target`. */
const mergePatch = (target: any, patch: any): any => mergePatchLib.apply(structuredClone(target), patch);

export class MemoryApi implements KubeApi {
  objects = new Map<string, any>();
  writes: string[] = [];
  private rv = 0;
  private uid = 0;
  private key(r: Ref) {
    return `${r.kind}/${r.namespace ?? ''}/${r.name}`;
  }
  async get<T extends KubernetesObject>(r: Ref): Promise<T | undefined> {
    const o = this.objects.get(this.key(r));
    return o && structuredClone(o);
  }
  async list<T extends KubernetesObject>(r: Ref, sel?: string): Promise<ListResult<T>> {
    const want = (sel ?? '')
      .split(',')
      .filter(Boolean)
      .map((s) => s.split('='));
    const items = [...this.objects.values()].filter(
      (o) => o.kind === r.kind && (!r.namespace || o.metadata.namespace === r.namespace) && want.every(([k, v]) => o.metadata.labels?.[k] === v),
    );
    return { items: structuredClone(items), resourceVersion: String(this.rv) };
  }
  async create<T extends KubernetesObject>(obj: T): Promise<T> {
    const k = this.key({ kind: obj.kind!, namespace: obj.metadata?.namespace, name: obj.metadata?.name });
    if (this.objects.has(k)) throw new KubeApiError(409, 'AlreadyExists', `${k} exists`);
    const stored = { ...structuredClone(obj), metadata: { ...obj.metadata, uid: `uid-${++this.uid}`, resourceVersion: String(++this.rv), generation: 1 } };
    this.objects.set(k, stored);
    if (obj.kind !== 'Event') this.writes.push(`create ${k}`);
    return structuredClone(stored);
  }
  async replace<T extends KubernetesObject>(obj: T): Promise<T> {
    const k = this.key({ kind: obj.kind!, namespace: obj.metadata?.namespace, name: obj.metadata?.name });
    const cur = this.objects.get(k);
    if (!cur) throw new KubeApiError(404, 'NotFound', `${k} not found`);
    if (obj.metadata?.resourceVersion && obj.metadata.resourceVersion !== cur.metadata.resourceVersion) throw new KubeApiError(409, 'Conflict', `${k} was modified`);
    obj = { ...structuredClone(obj), metadata: { ...obj.metadata, uid: cur.metadata.uid, resourceVersion: String(++this.rv) } };
    this.objects.set(k, structuredClone(obj));
    this.writes.push(`replace ${k}`);
    return obj;
  }
  async mergePatch<T extends KubernetesObject>(r: Ref, patch: any, sub?: 'status'): Promise<T> {
    const k = this.key(r);
    const cur = this.objects.get(k);
    if (!cur) throw new KubeApiError(404, 'NotFound', `${k} not found`);
    let next = sub === 'status' ? { ...cur, status: mergePatch(cur.status, patch.status) } : { ...mergePatch(cur, { ...patch, status: undefined }), status: cur.status };
    if (sub !== 'status' && JSON.stringify(next.spec) !== JSON.stringify(cur.spec)) next = { ...next, metadata: { ...next.metadata, generation: cur.metadata.generation + 1 } };
    next.metadata.resourceVersion = String(++this.rv);
    this.objects.set(k, next);
    this.writes.push(`patch${sub ? '/status' : ''} ${k}`);
    return structuredClone(next);
  }
  async delete(r: Ref): Promise<void> {
    this.objects.delete(this.key(r));
    this.writes.push(`delete ${this.key(r)}`);
  }
}
