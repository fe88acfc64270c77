// The operator's seam to the API server (KubeApi: get, list, create, replace, merge patch of an
// object or of a custom resource's status, delete) and its implementation on
// @kubernetes/client-node: KubernetesObjectApi for objects (paths found by discovery, cached per
// group version) and CustomObjectsApi for the status subresource. Reconcilers see the objects as
// the API server sends them (plain JSON, the shape the watch stream and the in-memory fake give):
// the library's typed models would turn timestamps into Dates and drop fields the model does not
// know, which a read-modify-write (replace) would then erase on the server.
import {
  ApiException,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
  type ResponseContext,
} from '@kubernetes/client-node';
// Not re-exported by the package's index; the same modules KubernetesObjectApi serializes with.
import { ObjectSerializer } from '@kubernetes/client-node/dist/serializer.js';
import { getSerializationType } from '@kubernetes/client-node/dist/util.js';
import { GROUP, VERSION } from '../api/constants.js';

/** apiVersion of each kind the operator touches (a Ref names only the kind). */
export const API_VERSIONS: Record<string, string> = {
  ConfigMap: 'v1',
  Secret: 'v1',
  Service: 'v1',
  ServiceAccount: 'v1',
  Pod: 'v1',
  Event: 'v1',
  StatefulSet: 'apps/v1',
  Role: 'rbac.authorization.k8s.io/v1',
  RoleBinding: 'rbac.authorization.k8s.io/v1',
  PodDisruptionBudget: 'policy/v1',
  NetworkPolicy: 'networking.k8s.io/v1',
  Lease: 'coordination.k8s.io/v1',
  MutatingWebhookConfiguration: 'admissionregistration.k8s.io/v1',
  StoreCluster: `${GROUP}/${VERSION}`,
  StoreSegment: `${GROUP}/${VERSION}`,
};

/** A failed API call: the HTTP status and the Status reason (NotFound, Conflict, Expired, ...). */
export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'KubeApiError';
  }
  get notFound() {
    return this.status === 404;
  }
  get conflict() {
    return this.status === 409;
  }
  get gone() {
    return this.status === 410;
  }
}

export interface Ref {
  kind: string;
  namespace?: string;
  name?: string;
}

export interface ListResult<T> {
  items: T[];
  resourceVersion: string;
}

/** What the reconcilers need from the API server (operator/testing/memory-api.ts is the fake). */
export interface KubeApi {
  get<T extends KubernetesObject>(ref: Ref): Promise<T | undefined>;
  list<T extends KubernetesObject>(ref: Ref, labelSelector?: string): Promise<ListResult<T>>;
  create<T extends KubernetesObject>(obj: T): Promise<T>;
  replace<T extends KubernetesObject>(obj: T): Promise<T>;
  /** RFC 7386 merge patch of the object, or (custom resources only) of its status subresource. */
  mergePatch<T extends KubernetesObject>(ref: Ref, patch: unknown, subresource?: 'status'): Promise<T>;
  /** Deletes with background propagation; an object already gone is not an error. */
  delete(ref: Ref): Promise<void>;
}

export function apiVersionOf(kind: string): string {
  const v = API_VERSIONS[kind];
  if (!v) throw new Error(`kube client: unknown kind ${kind}`);
  return v;
}

/** The library's object API, answering with the JSON the server sent and exposing collection paths. */
class JsonObjectApi extends KubernetesObjectApi {
  static forConfig(kc: KubeConfig): JsonObjectApi {
    const api = kc.makeApiClient(JsonObjectApi);
    api.setDefaultNamespace(kc);
    return api;
  }

  protected override async processResponse<T extends KubernetesObject>(response: ResponseContext, type?: string): Promise<T> {
    if (response.httpStatusCode < 200 || response.httpStatusCode > 299) return super.processResponse(response, type); // throws ApiException
    const text = await response.body.text();
    return (text ? JSON.parse(text) : {}) as T;
  }

  /** `/apis/<group>/<version>[/namespaces/<ns>]/<plural>`, the path a list or watch of a kind uses. */
  collectionPath(apiVersion: string, kind: string, namespace?: string): Promise<string> {
    return this.specUriPath({ apiVersion, kind, metadata: { namespace } }, 'list');
  }

  /** The kind's resource name (plural), from discovery. */
  async plural(apiVersion: string, kind: string): Promise<string> {
    const r = await this.resource(apiVersion, kind);
    if (!r) throw new Error(`kube client: the API server does not serve ${kind} in ${apiVersion}`);
    return r.name;
  }
}

/**
 * A built-in object in the library's model form. create/replace serialize the body through the
 * library's models, which name a few JSON fields differently (a NetworkPolicy rule's `from` is
 * `_from`) and drop what they do not know: plain JSON sent as is lost `from`, and a policy meant
 * for members only admitted everyone. Reading the JSON into the model first makes the round trip
 * exact. Custom resources have no model and go as they are.
 */
function asModel<T extends KubernetesObject>(obj: T): T {
  if (obj.apiVersion?.startsWith(`${GROUP}/`)) return obj;
  return ObjectSerializer.deserialize(obj, getSerializationType(obj.apiVersion, obj.kind)) as T;
}

/** Turns the library's ApiException (HTTP status, Status body) into a KubeApiError. */
export function toKubeApiError(e: unknown, what: string): unknown {
  if (!(e instanceof ApiException)) return e;
  let body: { reason?: string; message?: string } = {};
  if (typeof e.body === 'string') {
    try {
      body = JSON.parse(e.body);
    } catch {
      body = { message: e.body };
    }
  } else if (e.body && typeof e.body === 'object') body = e.body as typeof body;
  return new KubeApiError(e.code, body.reason ?? '', `${what}: ${e.code} ${body.message ?? ''}`.trimEnd(), { cause: e });
}

export class KubeClient implements KubeApi {
  private readonly objects: JsonObjectApi;
  private readonly custom: CustomObjectsApi;

  constructor(kc: KubeConfig) {
    if (!kc.getCurrentCluster()) throw new Error('kube client: the kubeconfig has no current cluster');
    this.objects = JsonObjectApi.forConfig(kc);
    this.custom = kc.makeApiClient(CustomObjectsApi);
  }

  private header(ref: Ref) {
    return { apiVersion: apiVersionOf(ref.kind), kind: ref.kind, metadata: { name: ref.name ?? '', namespace: ref.namespace } };
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw toKubeApiError(e, what);
    }
  }

  /** The path a list or watch of `kind` (in `namespace`, or all namespaces) uses. */
  collectionPath(kind: string, namespace?: string): Promise<string> {
    return this.call(`discover ${kind}`, () => this.objects.collectionPath(apiVersionOf(kind), kind, namespace));
  }

  async get<T extends KubernetesObject>(ref: Ref): Promise<T | undefined> {
    try {
      return await this.call(`get ${ref.kind} ${ref.namespace ?? ''}/${ref.name}`, () => this.objects.read<T>(this.header(ref)));
    } catch (e) {
      if (e instanceof KubeApiError && e.notFound) return undefined;
      throw e;
    }
  }

  async list<T extends KubernetesObject>(ref: Ref, labelSelector?: string): Promise<ListResult<T>> {
    const apiVersion = apiVersionOf(ref.kind);
    const list = await this.call(`list ${ref.kind}`, () => this.objects.list<T>(apiVersion, ref.kind, ref.namespace, undefined, undefined, undefined, undefined, labelSelector));
    // List items carry no kind/apiVersion; restore them so callers can treat them as objects.
    const items = (list.items ?? []).map((i) => ({ apiVersion, kind: ref.kind, ...i }));
    return { items, resourceVersion: list.metadata?.resourceVersion ?? '' };
  }

  create<T extends KubernetesObject>(obj: T): Promise<T> {
    return this.call(`create ${obj.kind} ${obj.metadata?.name}`, () => this.objects.create(asModel(obj)));
  }

  replace<T extends KubernetesObject>(obj: T): Promise<T> {
    return this.call(`replace ${obj.kind} ${obj.metadata?.name}`, () => this.objects.replace(asModel(obj)));
  }

  async mergePatch<T extends KubernetesObject>(ref: Ref, patch: unknown, subresource?: 'status'): Promise<T> {
    const what = `patch ${ref.kind} ${ref.namespace ?? ''}/${ref.name}${subresource ? '/status' : ''}`;
    const head = this.header(ref);
    if (subresource === 'status') {
      const [group, version] = head.apiVersion.split('/');
      if (!version || !ref.namespace || !ref.name) throw new Error(`kube client: ${what}: the status subresource is patched for namespaced custom resources only`);
      const plural = await this.call(what, () => this.objects.plural(head.apiVersion, ref.kind));
      return this.call(
        what,
        () =>
          this.custom.patchNamespacedCustomObjectStatus(
            { group, version, namespace: ref.namespace!, plural, name: ref.name!, body: patch },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          ) as Promise<T>,
      );
    }
    // The object API takes the target from the body: apiVersion, kind and metadata name/namespace
    // are sent along (they equal the stored values, so the merge leaves them as they are).
    const p = (patch ?? {}) as { metadata?: object };
    const body = { ...p, ...head, metadata: { ...p.metadata, ...head.metadata } } as unknown as T;
    return this.call(what, () => this.objects.patch<T>(body, undefined, undefined, undefined, undefined, PatchStrategy.MergePatch));
  }

  async delete(ref: Ref): Promise<void> {
    try {
      await this.call(`delete ${ref.kind} ${ref.namespace ?? ''}/${ref.name}`, () =>
        this.objects.delete(this.header(ref), undefined, undefined, undefined, undefined, 'Background'),
      );
    } catch (e) {
      if (!(e instanceof KubeApiError && e.notFound)) throw e;
    }
  }
}
