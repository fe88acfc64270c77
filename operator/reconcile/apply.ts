// Create-or-patch of rendered objects, and deletion of the ones a spec no longer wants: the
// "diff, apply" half of a reconcile pass. An object is patched only when it lacks a desired
// field, so a steady cluster causes no writes.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { ObjectRef } from '../render/render.js';
import type { EventRecorder } from './events.js';
import type { KubeApi } from './kube-client.js';
import { isSubset, managedFields, mergePatchFor } from './object-diff.js';

export type ApplyOutcome = 'created' | 'updated' | 'unchanged';

export async function applyObject(api: KubeApi, desired: KubernetesObject, owner: KubernetesObject, events: EventRecorder): Promise<ApplyOutcome> {
  const ref = { kind: desired.kind ?? '', namespace: desired.metadata?.namespace, name: desired.metadata?.name };
  const existing = await api.get(ref);
  if (!existing) {
    await api.create(desired);
    events.normal(owner, 'Created', `created ${ref.kind} ${ref.name}`);
    return 'created';
  }
  const want = managedFields(desired as KubernetesObject & { status?: unknown });
  if (isSubset(want, existing)) return 'unchanged';
  const foreignOwner = existing.metadata?.ownerReferences?.find((r) => r.controller && r.uid !== owner.metadata?.uid);
  if (foreignOwner) throw new Error(`${ref.kind} ${ref.name} exists and is controlled by ${foreignOwner.kind} ${foreignOwner.name}; rename one of them`);
  await api.mergePatch(ref, mergePatchFor(want, existing));
  events.normal(owner, 'Updated', `updated ${ref.kind} ${ref.name}`);
  return 'updated';
}

/** Deletes an object the spec no longer wants, if it exists and this owner controls it. */
export async function removeObject(api: KubeApi, ref: ObjectRef, owner: KubernetesObject, events: EventRecorder): Promise<boolean> {
  const existing = await api.get({ kind: ref.kind, namespace: ref.namespace, name: ref.name });
  if (!existing) return false;
  const controlled = existing.metadata?.ownerReferences?.some((r) => r.controller && r.uid === owner.metadata?.uid);
  if (!controlled) return false;
  await api.delete({ kind: ref.kind, namespace: ref.namespace, name: ref.name });
  events.normal(owner, 'Deleted', `deleted ${ref.kind} ${ref.name}, no longer needed by the spec`);
  return true;
}
