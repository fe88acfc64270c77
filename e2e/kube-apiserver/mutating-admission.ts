// Mutating admission webhooks, called the way the real API server calls them: for each
// MutatingWebhookConfiguration webhook whose rules, namespaceSelector and objectSelector match
// the request and whose matchConditions (a CEL subset) hold, an AdmissionReview v1 is POSTed over
// HTTPS (trusting only the caBundle), a denial fails the request, and a returned JSONPatch is
// applied before the next webhook. Service
// references are mapped to a local address by a resolver the test provides. Runs on create and
// update (PUT); failurePolicy Fail (default) or Ignore decides what a call error does.

import { randomUUID } from 'node:crypto';
import https from 'node:https';
import tls from 'node:tls';
import { ApiError } from './api-error.js';
import { evalExpression } from '../../common/cel-rules.js';
import { isPlainObject, jsonPatch } from './json-patch.js';
import type { ObjectStore, Obj } from './object-store.js';
import type { ResourceType } from './resource-registry.js';

/** Maps a webhook Service (namespace, name, port) to `host:port` reachable from the test. */
export type ServiceResolver = (namespace: string, name: string, port: number) => string | undefined;

type Operation = 'CREATE' | 'UPDATE';

function matchesExpressions(labels: Record<string, string>, sel: Obj | undefined): boolean {
  if (!sel) return true;
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of (sel.matchExpressions ?? []) as Obj[]) {
    const has = e.key in labels;
    const values: string[] = e.values ?? [];
    if (e.operator === 'In' && !(has && values.includes(labels[e.key]))) return false;
    if (e.operator === 'NotIn' && has && values.includes(labels[e.key])) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

function ruleMatches(rule: Obj, t: ResourceType, op: Operation): boolean {
  const any = (list: string[] | undefined, v: string) => (list ?? []).some((x) => x === '*' || x === v);
  const scope = rule.scope ?? '*';
  if (scope !== '*' && (scope === 'Namespaced') !== t.namespaced) return false;
  return any(rule.operations, op) && any(rule.apiGroups, t.group) && any(rule.apiVersions, t.version) && any(rule.resources, t.plural);
}

function post(url: URL, body: string, caBundle: string | undefined, serverName: string | undefined, timeoutMs: number): Promise<Obj> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
        ca: caBundle ? Buffer.from(caBundle, 'base64').toString('utf8') : undefined,
        // The certificate names the Service, not the loopback address the resolver returned.
        checkServerIdentity: (host, cert) => tls.checkServerIdentity(serverName ?? host, cert),
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 0) !== 200) return reject(new Error(`the server responded with status ${res.statusCode}: ${text}`));
          try {
            resolve(JSON.parse(text));
          } catch {
            reject(new Error(`the response is not JSON: ${text.slice(0, 200)}`));
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`context deadline exceeded (${timeoutMs} ms)`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** Runs every matching mutating webhook over `obj`; returns the admitted (possibly patched) object. */
export async function admitMutating(
  store: ObjectStore,
  t: ResourceType,
  namespace: string,
  obj: Obj,
  old: Obj | undefined,
  op: Operation,
  resolve: ServiceResolver | undefined,
  dryRun: boolean,
): Promise<Obj> {
  const cfgType = store.registry.get('admissionregistration.k8s.io', 'v1', 'mutatingwebhookconfigurations')!;
  const configs = store.list(cfgType, '').items;
  if (configs.length === 0) return obj;
  const nsType = store.registry.get('', 'v1', 'namespaces')!;
  let nsLabels: Record<string, string> = {};
  if (namespace) {
    try {
      nsLabels = { ...(store.get(nsType, '', namespace).metadata.labels ?? {}), 'kubernetes.io/metadata.name': namespace };
    } catch {
      nsLabels = { 'kubernetes.io/metadata.name': namespace };
    }
  }
  let current = obj;
  for (const cfg of configs) {
    for (const wh of (cfg.webhooks ?? []) as Obj[]) {
      if (!(wh.rules ?? []).some((r: Obj) => ruleMatches(r, t, op))) continue;
      if (t.namespaced && !matchesExpressions(nsLabels, wh.namespaceSelector)) continue;
      if (!matchesExpressions(current.metadata?.labels ?? {}, wh.objectSelector)) continue;
      const ignore = wh.failurePolicy === 'Ignore';
      const cond = matchConditions(wh, current, old, t, namespace, op);
      if (cond === 'error' && !ignore)
        throw new ApiError(500, 'InternalError', `Internal error occurred: failed calling webhook "${wh.name}": matchConditions could not be evaluated`);
      if (cond !== true) continue;
      try {
        current = await callWebhook(wh, t, namespace, current, old, op, resolve, dryRun);
      } catch (e) {
        if (e instanceof ApiError) throw e;
        if (!ignore) throw new ApiError(500, 'InternalError', `Internal error occurred: failed calling webhook "${wh.name}": ${(e as Error).message}`);
      }
    }
  }
  return current;
}

/**
 * The webhook's matchConditions (CEL over `object`, `oldObject`, `request`): true when all hold.
 * Conditions outside the evaluated CEL subset count as holding (the webhook is called).
 */
function matchConditions(wh: Obj, obj: Obj, old: Obj | undefined, t: ResourceType, namespace: string, op: Operation): boolean | 'error' {
  const env = {
    object: obj,
    oldObject: old ?? null,
    request: {
      operation: op,
      namespace,
      name: obj.metadata?.name ?? '',
      kind: { group: t.group, version: t.version, kind: t.kind },
      resource: { group: t.group, version: t.version, resource: t.plural },
    },
  };
  for (const c of (wh.matchConditions ?? []) as Obj[]) {
    const r = evalExpression(String(c.expression), env);
    if (r === 'error') return 'error';
    if (r === false) return false;
  }
  return true;
}

async function callWebhook(
  wh: Obj,
  t: ResourceType,
  namespace: string,
  obj: Obj,
  old: Obj | undefined,
  op: Operation,
  resolve: ServiceResolver | undefined,
  dryRun: boolean,
): Promise<Obj> {
  const cc = wh.clientConfig ?? {};
  let url: URL;
  let serverName: string | undefined;
  if (cc.url) url = new URL(cc.url);
  else if (cc.service) {
    const s = cc.service;
    const port = s.port ?? 443;
    const addr = resolve?.(s.namespace, s.name, port);
    if (!addr) throw new Error(`service "${s.name}.${s.namespace}.svc:${port}" cannot be reached from the test API server (no resolver entry)`);
    url = new URL(`https://${addr}${s.path ?? '/'}`);
    serverName = `${s.name}.${s.namespace}.svc`;
  } else throw new Error('the webhook has neither clientConfig.url nor clientConfig.service');
  const uid = randomUUID();
  const gvk = { group: t.group, version: t.version, kind: t.kind };
  const gvr = { group: t.group, version: t.version, resource: t.plural };
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: gvk,
      resource: gvr,
      requestKind: gvk,
      requestResource: gvr,
      name: obj.metadata?.name ?? '',
      namespace: namespace || undefined,
      operation: op,
      userInfo: { username: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] },
      object: obj,
      oldObject: old ?? null,
      dryRun,
      options: { kind: op === 'CREATE' ? 'CreateOptions' : 'UpdateOptions', apiVersion: 'meta.k8s.io/v1' },
    },
  };
  const res = await post(url, JSON.stringify(review), cc.caBundle, serverName, (wh.timeoutSeconds ?? 10) * 1000);
  const r = res.response;
  if (!isPlainObject(r) || r.uid !== uid) throw new Error(`expected response.uid="${uid}", got "${isPlainObject(r) ? r.uid : ''}"`);
  if (!r.allowed) {
    const st = r.status ?? {};
    throw new ApiError(st.code ?? 403, st.reason ?? 'Forbidden', `admission webhook "${wh.name}" denied the request: ${st.message ?? 'without explanation'}`);
  }
  if (!r.patch) return obj;
  if (r.patchType !== 'JSONPatch') throw new Error(`unsupported patchType ${r.patchType}`);
  return jsonPatch(obj, JSON.parse(Buffer.from(r.patch, 'base64').toString('utf8')));
}
