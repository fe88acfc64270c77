// The admission decision for one AdmissionReview v1: whether to inject, into which cluster's
// settings, and the JSON patch (the before/after difference of injectSidecar). Pure apart from
// the cluster lookup, which the caller passes in (an informer cache in the operator, a file in
// the CLI).
import type { V1Pod } from '@kubernetes/client-node';
import type { DefaultedStoreCluster } from '../api/defaults.js';
import { Annotations } from '../api/constants.js';
import { diff, type PatchOp } from './json-patch.js';
import { InjectionError, effectiveSettings, injectSidecar, injectionSettings, isInjected, parseInjectAnnotations } from './inject.js';

export interface AdmissionReview {
  apiVersion: string;
  kind: string;
  request?: {
    uid: string;
    kind?: { group: string; version: string; kind: string };
    namespace?: string;
    operation?: string;
    object?: unknown;
    dryRun?: boolean;
  };
  response?: AdmissionResponse;
}
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  patchType?: 'JSONPatch';
  patch?: string;
  status?: { code: number; message: string; reason?: string };
  warnings?: string[];
}

/** Finds the StoreCluster for a pod: by name when given, else the only one in the namespace. */
export type ClusterLookup = (namespace: string, name: string | undefined) => DefaultedStoreCluster | string;

export interface MutationResult {
  pod: V1Pod;
  patch: PatchOp[];
  /** Set when the request is denied: every reason, readable. */
  denied?: string[];
}

/** The mutation for one pod in `namespace`: patch (possibly empty) or the reasons to deny. */
export function mutatePod(pod: V1Pod, namespace: string, lookup: ClusterLookup): MutationResult {
  const { request, errors } = parseInjectAnnotations(pod.metadata?.annotations);
  if (!request.inject && errors.length === 0) return { pod, patch: [] };
  if (isInjected(pod)) return { pod, patch: [] };
  const denied = [...errors];
  let settings;
  if (request.inject) {
    const found = lookup(request.cluster?.namespace ?? namespace, request.cluster?.name);
    if (typeof found === 'string') denied.push(`${Annotations.cluster}: ${found}`);
    else settings = effectiveSettings(injectionSettings(found), request);
  }
  if (denied.length || !settings) return { pod, patch: [], denied };
  try {
    const mutated = injectSidecar(pod, settings);
    return { pod: mutated, patch: diff(pod, mutated) };
  } catch (e) {
    if (e instanceof InjectionError) return { pod, patch: [], denied: e.errors };
    throw e;
  }
}

/** The AdmissionReview response for a request (v1 in, v1 out). */
export function review(input: AdmissionReview, lookup: ClusterLookup): AdmissionReview {
  const req = input.request;
  const out = (response: Omit<AdmissionResponse, 'uid'>): AdmissionReview => ({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: { uid: req?.uid ?? '', ...response },
  });
  if (!req || !req.uid) return out({ allowed: false, status: { code: 400, message: 'AdmissionReview has no request.uid', reason: 'BadRequest' } });
  if (req.kind && req.kind.kind !== 'Pod') return out({ allowed: true });
  if (req.operation && req.operation !== 'CREATE') return out({ allowed: true });
  const pod = (req.object ?? {}) as V1Pod;
  const namespace = req.namespace ?? pod.metadata?.namespace ?? 'default';
  const result = mutatePod(pod, namespace, lookup);
  if (result.denied) {
    const who = pod.metadata?.name ?? pod.metadata?.generateName ?? 'pod';
    return out({ allowed: false, status: { code: 400, reason: 'BadRequest', message: `store sidecar injection into ${namespace}/${who} refused: ${result.denied.join('; ')}` } });
  }
  if (result.patch.length === 0) return out({ allowed: true });
  return out({ allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(result.patch)).toString('base64') });
}
