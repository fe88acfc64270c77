// The object store at the heart of the test API server: CRUD with the real server's metadata
// semantics (uid, a global resourceVersion, generation, creationTimestamp, generateName,
// finalizers and deletionTimestamp, ownerReference garbage collection, namespace cleanup),
// status subresources, patches, server-side apply, CRD registration with schema defaulting,
// pruning and validation, and a bounded event history that watches resume from (410 past it).
// Pure: time and uids come from injected functions, events go to subscribed listeners.

import { ApiError, alreadyExists, badRequest, conflict, invalid, notFound, type StatusCause } from './api-error.js';
import { defaultBuiltin, validateBuiltin, validateMetadata, validateName } from './builtin-validation.js';
import { deepClone, deepEqual, isPlainObject, jsonPatch, mergePatch } from './json-patch.js';
import { ResourceRegistry, typesFromCrd, type ResourceType } from './resource-registry.js';
import { parseFieldSelector, parseLabelSelector } from './selector.js';
import { toScale, withReplicas } from './scale-subresource.js';
import { applyConfig, fieldsV1 } from './server-side-apply.js';
import { strategicMergePatch } from './strategic-merge-patch.js';
import { applyDefaults, prune, validate, type RuleEvaluator } from '../../common/structural-schema.js';

export type Obj = Record<string, any>;
export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  type: EventType;
  rv: number;
  /** `group/plural`: the storage identity of the resource, whatever version is asked for. */
  resource: string;
  object: Obj;
  /** The previous state, for MODIFIED (lets label-selector watches turn moves into ADDED/DELETED). */
  old?: Obj;
}

export interface StoreOptions {
  /** Wall clock in ms, for creationTimestamp and deletionTimestamp. */
  now: () => number;
  /** Source of uids (random v4 in the server, a counter in tests). */
  uid: () => string;
  /** How many events the history keeps for watch resumption; older resourceVersions get 410. */
  historyLimit?: number;
  evalRule?: RuleEvaluator;
}

export interface WriteOptions {
  fieldManager?: string;
  /** Strict rejects unknown fields with 400; Ignore and Warn prune them (Warn reports them). */
  fieldValidation?: 'Strict' | 'Warn' | 'Ignore';
  dryRun?: boolean;
}

export interface DeleteOptions {
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun?: boolean;
}

export interface ListOptions {
  labelSelector?: string | null;
  fieldSelector?: string | null;
  limit?: number;
  continueToken?: string | null;
}

export type PatchType = 'json' | 'merge' | 'strategic' | 'apply';

export const DEFAULT_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

function resourceId(t: ResourceType): string {
  return `${t.group}/${t.plural}`;
}

function objKey(ns: string, name: string): string {
  return `${ns}/${name}`;
}

function timestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function apiVersionOf(t: ResourceType, version = t.version): string {
  return t.group ? `${t.group}/${version}` : version;
}

/** Everything but metadata and status: a change here bumps metadata.generation. */
function specPart(o: Obj): Obj {
  const { metadata: _m, status: _s, ...rest } = o;
  return rest;
}

/** Object content compared for no-op detection (a write that changes nothing is not stored). */
function comparable(o: Obj): Obj {
  const { resourceVersion: _rv, managedFields: _mf, ...meta } = o.metadata ?? {};
  return { ...o, metadata: meta };
}

export class ObjectStore {
  readonly registry = new ResourceRegistry();
  private rv = 1;
  private readonly data = new Map<string, Map<string, Obj>>();
  private readonly history: StoreEvent[] = [];
  private compactedRv = 0;
  private readonly listeners = new Set<(ev: StoreEvent) => void>();
  private readonly applied = new Map<string, Obj>();
  private readonly historyLimit: number;
  private ipCounter = 1;
  /** Warnings of the last write (unknown fields pruned under fieldValidation=Warn). */
  lastWarnings: string[] = [];

  constructor(private readonly opts: StoreOptions) {
    this.historyLimit = opts.historyLimit ?? 10_000;
    const nsType = this.registry.get('', 'v1', 'namespaces')!;
    for (const ns of DEFAULT_NAMESPACES) this.create(nsType, '', { metadata: { name: ns } });
  }

  currentRv(): number {
    return this.rv;
  }

  subscribe(listener: (ev: StoreEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Drops the event history up to `upTo` (default: all of it); watches from before it get 410. */
  compact(upTo = this.rv): void {
    while (this.history.length > 0 && this.history[0].rv <= upTo) this.history.shift();
    this.compactedRv = Math.max(this.compactedRv, upTo);
  }

  private table(t: ResourceType): Map<string, Obj> {
    const id = resourceId(t);
    let m = this.data.get(id);
    if (!m) this.data.set(id, (m = new Map()));
    return m;
  }

  private emit(type: EventType, t: ResourceType, object: Obj, old?: Obj): void {
    const ev: StoreEvent = { type, rv: Number(object.metadata.resourceVersion), resource: resourceId(t), object: deepClone(object), old };
    this.history.push(ev);
    while (this.history.length > this.historyLimit) this.compactedRv = this.history.shift()!.rv;
    for (const l of this.listeners) l(ev);
  }

  /** The object as served at `version` (custom resources share storage across versions). */
  present(t: ResourceType, o: Obj): Obj {
    const out = deepClone(o);
    out.apiVersion = apiVersionOf(t);
    out.kind = t.kind;
    return out;
  }

  private namespaceOf(t: ResourceType, ns: string): string {
    if (!t.namespaced) return '';
    if (!ns) throw badRequest('the server could not find the requested resource: namespace is required');
    return ns;
  }

  private requireNamespace(ns: string): void {
    if (!ns) return;
    const nsObj = this.data.get('/namespaces')?.get(objKey('', ns));
    if (!nsObj) throw notFound('namespaces', '', ns);
    if (nsObj.metadata.deletionTimestamp) {
      throw new ApiError(403, 'Forbidden', `unable to create new content in namespace ${ns} because it is being terminated`);
    }
  }

  get(t: ResourceType, ns: string, name: string): Obj {
    const o = this.table(t).get(objKey(this.namespaceOf(t, ns), name));
    if (!o) throw notFound(t.plural, t.group, name);
    return this.present(t, o);
  }

  /** Lists objects of a type (all namespaces when `ns` is ''); sorted by namespace and name. */
  list(t: ResourceType, ns: string, opts: ListOptions = {}): Obj {
    const labelSel = parseLabelSelector(opts.labelSelector);
    const fieldSel = parseFieldSelector(opts.fieldSelector, t.kind, t.selectableFields);
    let items = [...this.table(t).entries()]
      .filter(([, o]) => (!ns || o.metadata.namespace === ns) && labelSel(o.metadata.labels ?? {}) && fieldSel(o))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const metadata: Obj = { resourceVersion: String(this.rv) };
    if (opts.continueToken) {
      let start: string;
      try {
        start = JSON.parse(Buffer.from(opts.continueToken, 'base64url').toString()).start;
      } catch {
        throw badRequest('invalid continue token');
      }
      items = items.filter(([k]) => k > start);
    }
    if (opts.limit && opts.limit > 0 && items.length > opts.limit) {
      const rest = items.length - opts.limit;
      items = items.slice(0, opts.limit);
      metadata.continue = Buffer.from(JSON.stringify({ start: items[items.length - 1][0] })).toString('base64url');
      metadata.remainingItemCount = rest;
    }
    return {
      kind: t.listKind,
      apiVersion: apiVersionOf(t),
      metadata,
      items: items.map(([, o]) => this.present(t, o)),
    };
  }

  /** Events of `t` after `sinceRv` still in history; throws 410 when history no longer reaches back. */
  eventsSince(t: ResourceType, sinceRv: number): StoreEvent[] {
    if (sinceRv < this.compactedRv) {
      throw new ApiError(410, 'Expired', `too old resource version: ${sinceRv} (${this.compactedRv})`);
    }
    const id = resourceId(t);
    return this.history.filter((e) => e.rv > sinceRv && e.resource === id);
  }

  /** All current objects of a type as synthetic ADDED events (a watch without resourceVersion). */
  currentAsEvents(t: ResourceType, ns: string): StoreEvent[] {
    return this.list(t, ns).items.map((o: Obj) => ({ type: 'ADDED' as const, rv: Number(o.metadata.resourceVersion), resource: resourceId(t), object: o }));
  }

  // ---- writes -------------------------------------------------------------------------------

  private checkBody(t: ResourceType, ns: string, body: unknown): Obj {
    if (!isPlainObject(body)) throw badRequest('the request body must be a JSON object');
    if (body.kind !== undefined && body.kind !== t.kind) {
      throw badRequest(`the kind "${body.kind}" does not match the resource "${t.plural}" (kind "${t.kind}")`);
    }
    if (body.apiVersion !== undefined && !t.versions.some((v) => apiVersionOf(t, v) === body.apiVersion)) {
      throw badRequest(`the API version in the data (${body.apiVersion}) does not match the expected API version (${apiVersionOf(t)})`);
    }
    const meta = body.metadata ?? {};
    if (!isPlainObject(meta)) throw badRequest('metadata must be an object');
    if (t.namespaced && meta.namespace && meta.namespace !== ns) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    return body;
  }

  /**
   * Runs the admission chain shared by create and update: schema defaulting, pruning and
   * validation for custom resources, built-in validation, and server-managed metadata.
   */
  private admit(t: ResourceType, obj: Obj, old: Obj | undefined, opts: WriteOptions): Obj {
    const name: string = obj.metadata.name;
    const causes: StatusCause[] = [];
    this.lastWarnings = [];
    if (t.custom && t.schema) {
      obj = applyDefaults(t.schema, obj);
      const pruned = prune(t.schema, obj);
      if (pruned.dropped.length > 0) {
        if (opts.fieldValidation === 'Strict') {
          throw badRequest(
            `${t.kind} in version "${t.version}" cannot be handled as a ${t.kind}: strict decoding error: ${pruned.dropped.map((f) => `unknown field "${f}"`).join(', ')}`,
          );
        }
        this.lastWarnings = pruned.dropped.map((f) => `unknown field "${f}"`);
      }
      obj = pruned.value;
      causes.push(...validateName(t.kind, name));
      causes.push(...validateMetadata(obj));
      causes.push(...validate(t.schema, obj, old, this.opts.evalRule));
    } else {
      causes.push(...validateName(t.kind, name));
      defaultBuiltin(t.kind, obj, old, () => this.allocateIp());
      causes.push(...validateBuiltin(t.kind, obj, old));
    }
    if (old?.metadata.deletionTimestamp) {
      const added = (obj.metadata.finalizers ?? []).filter((f: string) => !(old.metadata.finalizers ?? []).includes(f));
      if (added.length > 0)
        causes.push({
          reason: 'FieldValueForbidden',
          field: 'metadata.finalizers',
          message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
        });
    }
    if (causes.length > 0) throw invalid(t.kind, t.group, name, causes);
    return obj;
  }

  private allocateIp(): string {
    const n = this.ipCounter++;
    return `10.96.${(n >> 8) & 255}.${n & 255}`;
  }

  private managedEntry(manager: string, operation: 'Apply' | 'Update', t: ResourceType, fields: Obj, subresource?: string): Obj {
    const e: Obj = { manager, operation, apiVersion: apiVersionOf(t), time: timestamp(this.opts.now()), fieldsType: 'FieldsV1', fieldsV1: fieldsV1(fields) };
    if (subresource) e.subresource = subresource;
    return e;
  }

  private recordManager(obj: Obj, entry: Obj | undefined): void {
    if (!entry) return;
    const list: Obj[] = (obj.metadata.managedFields ?? []).filter(
      (m: Obj) => !(m.manager === entry.manager && m.operation === entry.operation && (m.subresource ?? '') === (entry.subresource ?? '')),
    );
    obj.metadata.managedFields = [...list, entry];
  }

  create(t: ResourceType, ns: string, body: unknown, opts: WriteOptions = {}, manager?: Obj): Obj {
    ns = this.namespaceOf(t, ns);
    let obj = deepClone(this.checkBody(t, ns, body));
    const meta = (obj.metadata = { ...(obj.metadata ?? {}) });
    if (!meta.name) {
      if (!meta.generateName)
        throw invalid(t.kind, t.group, '', [{ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' }]);
      meta.name = `${meta.generateName}${this.suffix()}`;
    }
    this.requireNamespace(ns);
    const table = this.table(t);
    if (table.has(objKey(ns, meta.name))) throw alreadyExists(t.plural, t.group, meta.name);
    if (t.namespaced) meta.namespace = ns;
    else delete meta.namespace;
    if (t.hasStatus && t.kind !== 'CustomResourceDefinition') delete obj.status;
    obj.apiVersion = apiVersionOf(t, t.versions[0]);
    obj.kind = t.kind;
    obj = this.admit(t, obj, undefined, opts);
    const m = obj.metadata;
    for (const k of ['deletionTimestamp', 'deletionGracePeriodSeconds', 'managedFields']) delete m[k];
    m.uid = this.opts.uid();
    m.creationTimestamp = timestamp(this.opts.now());
    if (t.hasGeneration || t.custom) m.generation = 1;
    else delete m.generation;
    this.recordManager(obj, manager ?? (opts.fieldManager ? this.managedEntry(opts.fieldManager, 'Update', t, obj) : undefined));
    if (t.kind === 'Namespace') obj.status = { phase: 'Active' };
    if (opts.dryRun) return this.present(t, obj);
    if (t.kind === 'CustomResourceDefinition') this.registerCrd(obj);
    m.resourceVersion = String(++this.rv);
    table.set(objKey(ns, m.name), obj);
    this.emit('ADDED', t, obj);
    return this.present(t, obj);
  }

  private suffix(): string {
    const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
    let s = '';
    const u = this.opts.uid().replace(/-/g, '');
    for (let i = 0; i < 5; i++) s += alphabet[parseInt(u.slice(i * 2, i * 2 + 2), 16) % alphabet.length];
    return s;
  }

  private stored(t: ResourceType, ns: string, name: string): Obj {
    const o = this.table(t).get(objKey(ns, name));
    if (!o) throw notFound(t.plural, t.group, name);
    return o;
  }

  /**
   * Replaces an object (PUT). `subresource` 'status' changes only status; the main resource
   * keeps the stored status when the type has a status subresource. A stale resourceVersion is 409.
   */
  update(t: ResourceType, ns: string, name: string, body: unknown, opts: WriteOptions = {}, subresource?: 'status', manager?: Obj): Obj {
    ns = this.namespaceOf(t, ns);
    const incoming = this.checkBody(t, ns, body);
    if (incoming.metadata?.name !== undefined && incoming.metadata.name !== name) {
      throw badRequest(`the name of the object (${incoming.metadata.name}) does not match the name on the URL (${name})`);
    }
    const old = this.stored(t, ns, name);
    const rvIn = incoming.metadata?.resourceVersion;
    if (rvIn !== undefined && rvIn !== '' && rvIn !== old.metadata.resourceVersion) throw conflict(t.plural, t.group, name);
    let obj: Obj;
    if (subresource === 'status') {
      obj = deepClone(old);
      if (incoming.status === undefined) delete obj.status;
      else obj.status = deepClone(incoming.status);
    } else {
      obj = deepClone(incoming);
      obj.metadata = { ...(obj.metadata ?? {}), name };
      if (t.hasStatus && t.kind !== 'CustomResourceDefinition') {
        if (old.status === undefined) delete obj.status;
        else obj.status = deepClone(old.status);
      }
    }
    obj.apiVersion = old.apiVersion;
    obj.kind = t.kind;
    if (t.namespaced) obj.metadata.namespace = ns;
    obj = this.admit(t, obj, old, opts);
    const m = obj.metadata;
    // Server-managed metadata is kept from storage whatever the client sent.
    for (const k of ['uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'generation', 'managedFields']) {
      if (old.metadata[k] === undefined) delete m[k];
      else m[k] = deepClone(old.metadata[k]);
    }
    if (m.generation !== undefined && !deepEqual(specPart(obj), specPart(old))) m.generation = old.metadata.generation + 1;
    this.recordManager(obj, manager ?? (opts.fieldManager ? this.managedEntry(opts.fieldManager, 'Update', t, obj, subresource) : undefined));
    m.resourceVersion = old.metadata.resourceVersion;
    if (deepEqual(comparable(obj), comparable(old))) return this.present(t, old);
    if (opts.dryRun) return this.present(t, obj);
    if (m.deletionTimestamp && (m.finalizers ?? []).length === 0) return this.remove(t, ns, name, obj);
    if (t.kind === 'CustomResourceDefinition') this.registerCrd(obj);
    m.resourceVersion = String(++this.rv);
    this.table(t).set(objKey(ns, name), obj);
    this.emit('MODIFIED', t, obj, deepClone(old));
    return this.present(t, obj);
  }

  /** The `/scale` view of a workload (404 when the type has no scale subresource). */
  getScale(t: ResourceType, ns: string, name: string): Obj {
    if (!t.scale) throw notFound(`${t.plural}/scale`, t.group, name);
    return toScale(this.get(t, ns, name), t.scale);
  }

  /** PUT or PATCH of `/scale`: only the replica count changes; a stale resourceVersion is 409. */
  updateScale(t: ResourceType, ns: string, name: string, scale: unknown, opts: WriteOptions = {}, patchType?: PatchType): Obj {
    const current = this.getScale(t, ns, name);
    let next = scale;
    if (patchType === 'json') next = jsonPatch(current, scale);
    else if (patchType) next = mergePatch(current, scale);
    const updated = this.update(t, ns, name, withReplicas(this.get(t, ns, name), t.scale!, next), opts);
    return toScale(updated, t.scale!);
  }

  /** PATCH in one of the four patch types; `apply` is server-side apply and may create. */
  patch(t: ResourceType, ns: string, name: string, type: PatchType, patch: unknown, opts: WriteOptions & { force?: boolean } = {}, subresource?: 'status'): Obj {
    ns = this.namespaceOf(t, ns);
    if (type === 'strategic' && t.custom) {
      throw new ApiError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
      );
    }
    if (type === 'apply') return this.apply(t, ns, name, patch, opts, subresource);
    const old = this.stored(t, ns, name);
    const current = this.present(t, old);
    let next: Obj;
    if (type === 'json') next = jsonPatch(current, patch);
    else if (type === 'merge') {
      if (!isPlainObject(patch)) throw badRequest('merge patch must be a JSON object');
      next = mergePatch(current, patch);
    } else next = strategicMergePatch(current, patch);
    if (!isPlainObject(next)) throw badRequest('the patch did not produce an object');
    // A patch carrying metadata.resourceVersion is a precondition, like an update's.
    const rvIn = isPlainObject(patch) ? (patch as Obj).metadata?.resourceVersion : undefined;
    next.metadata = { ...(next.metadata ?? {}), resourceVersion: rvIn ?? old.metadata.resourceVersion };
    return this.update(t, ns, name, next, opts, subresource);
  }

  private apply(t: ResourceType, ns: string, name: string, config: unknown, opts: WriteOptions, subresource?: 'status'): Obj {
    if (!opts.fieldManager) throw badRequest('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch');
    if (!isPlainObject(config)) throw badRequest('apply patch must be an object');
    if (config.metadata?.name !== undefined && config.metadata.name !== name) {
      throw badRequest(`the name of the object (${config.metadata.name}) does not match the name on the URL (${name})`);
    }
    const key = `${resourceId(t)}/${ns}/${name}/${opts.fieldManager}/${subresource ?? ''}`;
    const existing = this.table(t).get(objKey(ns, name));
    const entry = this.managedEntry(opts.fieldManager, 'Apply', t, config, subresource);
    const base = existing ? this.present(t, existing) : {};
    const merged = applyConfig(base, config, this.applied.get(key), !t.custom);
    delete merged.metadata?.resourceVersion;
    const result = existing
      ? this.update(t, ns, name, merged, opts, subresource, entry)
      : this.create(t, ns, { ...merged, metadata: { ...(merged.metadata ?? {}), name } }, opts, entry);
    if (!opts.dryRun) this.applied.set(key, deepClone(config));
    return result;
  }

  /**
   * DELETE: objects with finalizers (or a Foreground deletion) are only marked with a
   * deletionTimestamp; the last finalizer's removal deletes them. Returns the object as it is after.
   */
  delete(t: ResourceType, ns: string, name: string, opts: DeleteOptions = {}): Obj {
    ns = this.namespaceOf(t, ns);
    const old = this.stored(t, ns, name);
    const pre = opts.preconditions ?? {};
    if (pre.uid && pre.uid !== old.metadata.uid) {
      throw new ApiError(409, 'Conflict', `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${old.metadata.uid}`);
    }
    if (pre.resourceVersion && pre.resourceVersion !== old.metadata.resourceVersion) {
      throw new ApiError(
        409,
        'Conflict',
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${old.metadata.resourceVersion}`,
      );
    }
    if (opts.dryRun) return this.present(t, old);
    const policy = opts.propagationPolicy ?? 'Background';
    if (policy === 'Orphan') this.orphanDependents(old.metadata.uid);
    if (policy === 'Foreground') this.deleteDependents(old.metadata.uid);
    if (t.kind === 'Namespace') return this.deleteNamespace(t, old);
    if ((old.metadata.finalizers ?? []).length > 0) {
      if (old.metadata.deletionTimestamp) return this.present(t, old);
      const obj = deepClone(old);
      obj.metadata.deletionTimestamp = timestamp(this.opts.now());
      obj.metadata.deletionGracePeriodSeconds = 0;
      // Marking for deletion bumps the generation, as the real server's markAsDeleting does.
      if (obj.metadata.generation !== undefined) obj.metadata.generation += 1;
      obj.metadata.resourceVersion = String(++this.rv);
      this.table(t).set(objKey(ns, name), obj);
      this.emit('MODIFIED', t, obj, deepClone(old));
      return this.present(t, obj);
    }
    return this.remove(t, ns, name, old);
  }

  /** Removes an object for good, then collects what it owned and what its removal empties. */
  private remove(t: ResourceType, ns: string, name: string, obj: Obj): Obj {
    const gone = deepClone(obj);
    gone.metadata.resourceVersion = String(++this.rv);
    this.table(t).delete(objKey(ns, name));
    this.emit('DELETED', t, gone);
    if (t.kind === 'CustomResourceDefinition') this.unregisterCrd(gone);
    this.collectGarbage(gone.metadata.uid);
    if (ns) this.finishNamespaceIfEmpty(ns);
    return this.present(t, gone);
  }

  private *allObjects(): Generator<[ResourceType, Obj]> {
    for (const t of this.registry.all()) {
      if (t.version !== t.versions[0]) continue; // one pass per storage, not per served version
      for (const o of [...this.table(t).values()]) yield [t, o];
    }
  }

  private uidExists(uid: string): boolean {
    for (const [, o] of this.allObjects()) if (o.metadata.uid === uid) return true;
    return false;
  }

  /** Background garbage collection: dependents whose owners are all gone are deleted. */
  private collectGarbage(ownerUid: string): void {
    for (const [t, o] of this.allObjects()) {
      const refs: Obj[] = o.metadata.ownerReferences ?? [];
      if (!refs.some((r) => r.uid === ownerUid)) continue;
      const live = refs.filter((r) => r.uid !== ownerUid && this.uidExists(r.uid));
      const ns = o.metadata.namespace ?? '';
      if (!this.table(t).has(objKey(ns, o.metadata.name))) continue;
      if (live.length === 0) this.delete(t, ns, o.metadata.name);
      else this.update(t, ns, o.metadata.name, { ...this.present(t, o), metadata: { ...o.metadata, ownerReferences: live } });
    }
  }

  /**
   * The garbage collector's check of one object: ownerReferences to owners that no longer exist
   * (an owner deleted while a client was still creating its dependents) are dropped, and the
   * object is deleted when no live owner remains. The HTTP shell runs it after every write that
   * carries ownerReferences, in the background as the real collector does.
   */
  collectIfOrphaned(resource: string, ns: string, name: string): void {
    const t = this.registry.all().find((x) => `${x.group}/${x.plural}` === resource && x.version === x.versions[0]);
    const o = t && this.table(t).get(objKey(ns, name));
    if (!t || !o) return;
    const refs: Obj[] = o.metadata.ownerReferences ?? [];
    const live = refs.filter((r) => this.uidExists(r.uid));
    if (live.length === refs.length) return;
    if (live.length === 0) this.delete(t, ns, name);
    else this.update(t, ns, name, { ...this.present(t, o), metadata: { ...o.metadata, ownerReferences: live } });
  }

  private orphanDependents(ownerUid: string): void {
    for (const [t, o] of this.allObjects()) {
      const refs: Obj[] = o.metadata.ownerReferences ?? [];
      if (!refs.some((r) => r.uid === ownerUid)) continue;
      const rest = refs.filter((r) => r.uid !== ownerUid);
      const meta = { ...o.metadata, ownerReferences: rest.length > 0 ? rest : undefined };
      if (!meta.ownerReferences) delete meta.ownerReferences;
      this.update(t, o.metadata.namespace ?? '', o.metadata.name, { ...this.present(t, o), metadata: meta });
    }
  }

  private deleteDependents(ownerUid: string): void {
    for (const [t, o] of this.allObjects()) {
      if ((o.metadata.ownerReferences ?? []).some((r: Obj) => r.uid === ownerUid)) {
        const ns = o.metadata.namespace ?? '';
        if (this.table(t).has(objKey(ns, o.metadata.name))) this.delete(t, ns, o.metadata.name, { propagationPolicy: 'Foreground' });
      }
    }
  }

  /** Namespace deletion: mark it Terminating, delete its content, remove it once empty. */
  private deleteNamespace(t: ResourceType, old: Obj): Obj {
    const name = old.metadata.name;
    if (!old.metadata.deletionTimestamp) {
      const obj = deepClone(old);
      obj.metadata.deletionTimestamp = timestamp(this.opts.now());
      obj.status = { phase: 'Terminating' };
      obj.metadata.resourceVersion = String(++this.rv);
      this.table(t).set(objKey('', name), obj);
      this.emit('MODIFIED', t, obj, deepClone(old));
    }
    for (const [ct, o] of this.allObjects()) {
      if (ct.namespaced && o.metadata.namespace === name && this.table(ct).has(objKey(name, o.metadata.name))) {
        this.delete(ct, name, o.metadata.name);
      }
    }
    const after = this.table(t).get(objKey('', name));
    if (after && this.namespaceEmpty(name)) return this.remove(t, '', name, after);
    return this.present(t, after ?? old);
  }

  private namespaceEmpty(ns: string): boolean {
    for (const [t, o] of this.allObjects()) if (t.namespaced && o.metadata.namespace === ns) return false;
    return true;
  }

  private finishNamespaceIfEmpty(ns: string): void {
    const nsType = this.registry.get('', 'v1', 'namespaces')!;
    const nsObj = this.table(nsType).get(objKey('', ns));
    if (nsObj?.metadata.deletionTimestamp && this.namespaceEmpty(ns)) this.remove(nsType, '', ns, nsObj);
  }

  /** DELETE on a collection: every matching object, each with delete's semantics. */
  deleteCollection(t: ResourceType, ns: string, opts: ListOptions & DeleteOptions = {}): Obj {
    const list = this.list(t, ns, opts);
    for (const o of list.items) {
      if (this.table(t).has(objKey(o.metadata.namespace ?? '', o.metadata.name))) this.delete(t, o.metadata.namespace ?? '', o.metadata.name, opts);
    }
    return list;
  }

  // ---- CRDs ---------------------------------------------------------------------------------

  private registerCrd(crd: Obj): void {
    const spec = crd.spec;
    for (const other of this.table(this.registry.get('apiextensions.k8s.io', 'v1', 'customresourcedefinitions')!).values()) {
      if (other.metadata.name !== crd.metadata.name && other.spec.group === spec.group && other.spec.names.kind === spec.names.kind) {
        throw invalid('CustomResourceDefinition', 'apiextensions.k8s.io', crd.metadata.name, [
          { reason: 'FieldValueInvalid', field: 'spec.names.kind', message: `Invalid value: "${spec.names.kind}": is already in use` },
        ]);
      }
    }
    const types = typesFromCrd(crd);
    const prevStorage = this.registry.all().find((t) => t.custom && `${t.plural}.${t.group}` === crd.metadata.name);
    this.registry.setCrd(crd.metadata.name, types);
    // Objects already stored stay under the same group/plural storage identity.
    if (prevStorage && resourceId(prevStorage) !== resourceId(types[0])) this.data.delete(resourceId(prevStorage));
    const names = spec.names;
    crd.status = {
      conditions: [
        { type: 'NamesAccepted', status: 'True', reason: 'NoConflicts', message: 'no conflicts found', lastTransitionTime: timestamp(this.opts.now()) },
        { type: 'Established', status: 'True', reason: 'InitialNamesAccepted', message: 'the initial names have been accepted', lastTransitionTime: timestamp(this.opts.now()) },
      ],
      acceptedNames: {
        plural: names.plural,
        singular: names.singular ?? names.kind.toLowerCase(),
        kind: names.kind,
        listKind: names.listKind ?? `${names.kind}List`,
        shortNames: names.shortNames,
        categories: names.categories,
      },
      storedVersions: [spec.versions.find((v: Obj) => v.storage)?.name],
    };
    for (const k of Object.keys(crd.status.acceptedNames)) if (crd.status.acceptedNames[k] === undefined) delete crd.status.acceptedNames[k];
  }

  /** Removing a CRD removes every instance (finalizers are not waited for) and its endpoints. */
  private unregisterCrd(crd: Obj): void {
    const t = this.registry.all().find((x) => x.custom && `${x.plural}.${x.group}` === crd.metadata.name);
    if (t) {
      for (const o of [...this.table(t).values()]) this.remove(t, o.metadata.namespace ?? '', o.metadata.name, o);
      this.data.delete(resourceId(t));
    }
    this.registry.removeCrd(crd.metadata.name);
  }
}
