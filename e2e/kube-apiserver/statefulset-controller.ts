// What kube-controller-manager and the kubelets would do for StatefulSets, reduced to its
// observable effect: pods `<name>-<ordinal>` are created from the template (owned by the set,
// with the pod-name and pod-index labels) and reported Running and Ready at once; ordinals past
// spec.replicas are deleted; the set's status (replicas, ready, updated, observedGeneration)
// follows. Optional: tests of an operator turn it on to watch a rollout complete.

import { ApiError } from './api-error.js';
import type { ObjectStore, Obj, StoreEvent } from './object-store.js';

export class StatefulSetController {
  private pending = new Set<string>();
  private unsubscribe?: () => void;
  private podIp = 1;

  constructor(private readonly store: ObjectStore) {}

  start(): void {
    this.unsubscribe = this.store.subscribe((ev) => this.onEvent(ev));
  }

  stop(): void {
    this.unsubscribe?.();
    this.pending.clear();
  }

  private onEvent(ev: StoreEvent): void {
    const m = ev.object.metadata;
    if (ev.resource === 'apps/statefulsets') this.schedule(m.namespace, m.name);
    else if (ev.resource === '/pods') {
      const owner = (m.ownerReferences ?? []).find((r: Obj) => r.kind === 'StatefulSet' && r.controller);
      if (owner && ev.type === 'DELETED') this.schedule(m.namespace, owner.name);
    }
  }

  /** Syncs after the current write's events have reached every watcher (no re-entrant writes). */
  private schedule(ns: string, name: string): void {
    const key = `${ns}/${name}`;
    if (this.pending.has(key)) return;
    this.pending.add(key);
    setImmediate(() => {
      if (!this.pending.delete(key)) return;
      try {
        this.sync(ns, name);
      } catch (e) {
        if (!(e instanceof ApiError && (e.code === 404 || e.code === 409))) throw e;
      }
    });
  }

  private sync(ns: string, name: string): void {
    const stsType = this.store.registry.get('apps', 'v1', 'statefulsets')!;
    const podType = this.store.registry.get('', 'v1', 'pods')!;
    let sts: Obj;
    try {
      sts = this.store.get(stsType, ns, name);
    } catch {
      return;
    }
    if (sts.metadata.deletionTimestamp) return;
    const replicas: number = sts.spec.replicas ?? 1;
    const owned = this.store.list(podType, ns).items.filter((p: Obj) => (p.metadata.ownerReferences ?? []).some((r: Obj) => r.uid === sts.metadata.uid));
    const byName = new Map(owned.map((p: Obj) => [p.metadata.name, p]));
    for (let i = 0; i < replicas; i++) {
      const podName = `${name}-${i}`;
      if (!byName.has(podName)) this.createPod(podType, sts, podName, i);
    }
    // Scale down removes the highest ordinal first, as the real controller does.
    const ordinalOf = (p: Obj) => Number(p.metadata.name.slice(name.length + 1));
    for (const p of [...owned].sort((a, b) => ordinalOf(b) - ordinalOf(a))) {
      if (!(ordinalOf(p) < replicas) && !p.metadata.deletionTimestamp) this.store.delete(podType, ns, p.metadata.name);
    }
    const status = {
      ...(sts.status ?? {}),
      observedGeneration: sts.metadata.generation,
      replicas,
      readyReplicas: replicas,
      currentReplicas: replicas,
      updatedReplicas: replicas,
      availableReplicas: replicas,
    };
    this.store.update(stsType, ns, name, { ...sts, status }, {}, 'status');
  }

  private createPod(podType: NonNullable<ReturnType<ObjectStore['registry']['get']>>, sts: Obj, podName: string, ordinal: number): void {
    const tpl = sts.spec.template ?? {};
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: podName,
        labels: { ...(tpl.metadata?.labels ?? {}), 'statefulset.kubernetes.io/pod-name': podName, 'apps.kubernetes.io/pod-index': String(ordinal) },
        annotations: tpl.metadata?.annotations,
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: sts.metadata.name, uid: sts.metadata.uid, controller: true, blockOwnerDeletion: true }],
      },
      spec: { ...(tpl.spec ?? {}), hostname: podName, subdomain: sts.spec.serviceName },
    };
    if (!pod.metadata.annotations) delete pod.metadata.annotations;
    const created = this.store.create(podType, sts.metadata.namespace, pod);
    const n = this.podIp++;
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    this.store.update(
      podType,
      sts.metadata.namespace,
      podName,
      {
        ...created,
        status: {
          phase: 'Running',
          podIP: `10.244.${(n >> 8) & 255}.${n & 255}`,
          startTime: now,
          conditions: ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({ type, status: 'True', lastTransitionTime: now })),
          containerStatuses: (pod.spec.containers ?? []).map((c: Obj) => ({
            name: c.name,
            image: c.image,
            ready: true,
            started: true,
            restartCount: 0,
            state: { running: { startedAt: now } },
          })),
        },
      },
      {},
      'status',
    );
  }
}
