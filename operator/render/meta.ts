// Object metadata shared by every rendered object: namespace, labels and the controller owner
// reference that lets the API server garbage-collect what a deleted CR owned.
import type { V1ObjectMeta, V1OwnerReference, V1ResourceRequirements } from '@kubernetes/client-node';
import { API_VERSION } from '../api/constants.js';

export interface Owner {
  kind: 'StoreCluster' | 'StoreSegment';
  metadata: { name: string; namespace: string; uid?: string };
}

export function ownerReference(owner: Owner): V1OwnerReference | undefined {
  if (!owner.metadata.uid) return undefined; // offline render: the object does not exist yet
  return { apiVersion: API_VERSION, kind: owner.kind, name: owner.metadata.name, uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true };
}

export function objectMeta(owner: Owner, name: string, labels: Record<string, string>, annotations?: Record<string, string>): V1ObjectMeta {
  const ref = ownerReference(owner);
  return {
    name,
    namespace: owner.metadata.namespace,
    labels,
    ...(annotations && Object.keys(annotations).length ? { annotations } : {}),
    ...(ref ? { ownerReferences: [ref] } : {}),
  };
}

/** CR resources (quantities may be numbers) as a container's ResourceRequirements (strings). */
export function containerResources(r?: { requests?: Record<string, number | string>; limits?: Record<string, number | string> }): V1ResourceRequirements | undefined {
  if (!r) return undefined;
  const str = (m?: Record<string, number | string>) => (m ? Object.fromEntries(Object.entries(m).map(([k, v]) => [k, String(v)])) : undefined);
  return { ...(r.requests ? { requests: str(r.requests) } : {}), ...(r.limits ? { limits: str(r.limits) } : {}) };
}
