// The HTTP shell of the test Kubernetes API server: plain HTTP on 127.0.0.1, REST verbs mapped
// onto the ObjectStore, content negotiation (JSON, YAML bodies, Table output for kubectl),
// the four patch types, and watches streamed as JSON lines with bookmarks and 410 Expired errors.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import yaml from 'js-yaml';
import { ApiError, badRequest, methodNotAllowed } from './api-error.js';
import { evalRule } from '../../common/cel-rules.js';
import { coreVersions, group, groupList, resourceList, versionInfo } from './discovery.js';
import { isPlainObject } from './json-patch.js';
import { OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_TYPE, openApiGroupVersion, openApiIndex, openApiV2 } from './openapi.js';
import { ObjectStore, type Obj, type PatchType, type StoreEvent, type WriteOptions } from './object-store.js';
import { parseResourcePath, type ResourceRequest } from './request-path.js';
import { parseFieldSelector, parseLabelSelector } from './selector.js';
import { StatefulSetController } from './statefulset-controller.js';
import { toTable } from './table.js';
import { decodeProtobufBody } from './protobuf-body.js';
import { admitMutating, type ServiceResolver } from './mutating-admission.js';

export interface KubeApiServerOptions {
  /** Events kept for watch resumption (default 10000); a watch from before them gets 410. */
  historyLimit?: number;
  /** Period of BOOKMARK events on watches that allow them (default 30 s). */
  bookmarkIntervalMs?: number;
  /** Called for every request, for debugging: `(method, url, status)`. */
  log?: (line: string) => void;
  /** Runs a StatefulSet controller that creates the pods and reports them Ready (default off). */
  statefulSetController?: boolean;
  /** Where mutating webhooks referenced by Service are reached (`host:port`); unresolved: call fails. */
  resolveService?: ServiceResolver;
}

const MAX_BODY = 8 * 1024 * 1024;

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) reject(new ApiError(413, 'RequestEntityTooLarge', 'request entity too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseBody(raw: Buffer, contentType: string): unknown {
  if (contentType.includes('protobuf')) return raw.length === 0 ? undefined : decodeProtobufBody(raw);
  const text = raw.toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return contentType.includes('yaml') ? yaml.load(text) : JSON.parse(text);
  } catch (e) {
    throw badRequest(`couldn't decode the request body: ${(e as Error).message}`);
  }
}

function patchTypeOf(contentType: string): PatchType {
  const ct = contentType.split(';')[0].trim();
  switch (ct) {
    case 'application/json-patch+json':
      return 'json';
    case 'application/merge-patch+json':
      return 'merge';
    case 'application/strategic-merge-patch+json':
      return 'strategic';
    case 'application/apply-patch+yaml':
    case 'application/apply-patch+cbor':
      return 'apply';
    default:
      throw new ApiError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got ${ct}`,
      );
  }
}

function wantsTable(accept: string | undefined): boolean {
  return Boolean(accept && /as=Table/.test(accept));
}

function send(res: http.ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
  const text = JSON.stringify(body);
  const headers: http.OutgoingHttpHeaders = { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) };
  if (warnings.length > 0) headers.Warning = warnings.map((w) => `299 - ${JSON.stringify(w)}`);
  res.writeHead(code, headers);
  res.end(text);
}

export class KubeApiServer {
  readonly store: ObjectStore;
  private readonly server: http.Server;
  private readonly watches = new Set<() => void>();
  private readonly watchSockets = new Set<() => void>();
  private readonly bookmarkIntervalMs: number;
  private addr = '';
  private readonly stsController?: StatefulSetController;

  constructor(private readonly opts: KubeApiServerOptions = {}) {
    this.store = new ObjectStore({ now: () => Date.now(), uid: () => randomUUID(), historyLimit: opts.historyLimit, evalRule });
    this.bookmarkIntervalMs = opts.bookmarkIntervalMs ?? 30_000;
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((e) => this.fail(res, e));
    });
    this.server.keepAliveTimeout = 5_000;
    // Background garbage collection of objects written with owners that no longer exist.
    this.store.subscribe((ev) => {
      if (ev.type === 'DELETED' || !(ev.object.metadata.ownerReferences ?? []).length) return;
      const { namespace, name } = ev.object.metadata;
      setImmediate(() => this.store.collectIfOrphaned(ev.resource, namespace ?? '', name));
    });
    if (opts.statefulSetController) {
      this.stsController = new StatefulSetController(this.store);
      this.stsController.start();
    }
  }

  /** Listens on 127.0.0.1 (port 0 picks a free port); resolves to the base URL. */
  async start(port = 0): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    const a = this.server.address() as AddressInfo;
    this.addr = `127.0.0.1:${a.port}`;
    return this.url;
  }

  get url(): string {
    return `http://${this.addr}`;
  }

  /** Ends every open watch, as a real server does on its watch timeouts or a restart; clients re-watch. */
  closeWatches(): void {
    for (const end of [...this.watches]) end();
  }

  /** Cuts every open watch connection without ending its response, as a network failure does. */
  dropWatches(): void {
    for (const drop of [...this.watchSockets]) drop();
  }

  /** How many watches are open (tests await a client's reconnection by watching this grow). */
  get openWatches(): number {
    return this.watches.size;
  }

  async stop(): Promise<void> {
    this.stsController?.stop();
    for (const end of [...this.watches]) end();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private fail(res: http.ServerResponse, e: unknown): void {
    const err = e instanceof ApiError ? e : new ApiError(500, 'InternalError', `Internal error occurred: ${(e as Error)?.stack ?? String(e)}`);
    if (res.headersSent) {
      res.end();
      return;
    }
    send(res, err.code, err.toStatus());
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    res.on('finish', () => this.opts.log?.(`${req.method} ${req.url} ${res.statusCode}`));
    const p = url.pathname.replace(/\/+$/, '') || '/';
    const reg = this.store.registry;
    if (req.method === 'GET') {
      if (p === '/version') return send(res, 200, versionInfo());
      if (p === '/healthz' || p === '/livez' || p === '/readyz') {
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.end('ok');
        return;
      }
      if (p === '/api') return send(res, 200, coreVersions(this.addr));
      if (p === '/apis') return send(res, 200, groupList(reg));
      if (p === '/openapi/v3') return send(res, 200, openApiIndex(reg));
      if (p === '/openapi/v2') {
        if (!String(req.headers.accept ?? '').includes('protobuf')) return send(res, 200, openApiV2());
        res.writeHead(200, { 'Content-Type': OPENAPI_V2_PROTOBUF_TYPE, 'Content-Length': OPENAPI_V2_PROTOBUF.length });
        res.end(OPENAPI_V2_PROTOBUF);
        return;
      }
      const oa = /^\/openapi\/v3\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(p);
      if (oa) {
        const doc = oa[1] ? openApiGroupVersion(reg, '', 'v1') : openApiGroupVersion(reg, oa[2], oa[3]);
        if (doc) return send(res, 200, doc);
        throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
      }
      const gv = /^\/(?:api\/(v1)|apis\/([^/]+)(?:\/([^/]+))?)$/.exec(p);
      if (gv) {
        const body = gv[1] ? resourceList(reg, '', 'v1') : gv[3] ? resourceList(reg, gv[2], gv[3]) : group(reg, gv[2]);
        if (body) return send(res, 200, body);
        throw new ApiError(404, 'NotFound', `the server could not find the requested resource`);
      }
    }
    const r = parseResourcePath(reg, p);
    if (!r) throw new ApiError(404, 'NotFound', `the server could not find the requested resource (${req.method} ${p})`);
    await this.serveResource(req, res, r, url.searchParams);
  }

  private async serveResource(req: http.IncomingMessage, res: http.ServerResponse, r: ResourceRequest, q: URLSearchParams): Promise<void> {
    const { type: t, namespace: ns, name } = r;
    const sub = r.subresource === 'status' ? 'status' : undefined;
    if (r.subresource === 'scale') return this.serveScale(req, res, r, q);
    const contentType = String(req.headers['content-type'] ?? 'application/json');
    const writeOpts: WriteOptions & { force?: boolean } = {
      fieldManager: q.get('fieldManager') ?? undefined,
      fieldValidation: (q.get('fieldValidation') as WriteOptions['fieldValidation']) ?? undefined,
      dryRun: q.getAll('dryRun').includes('All'),
      force: q.get('force') === 'true',
    };
    const table = wantsTable(req.headers.accept);
    const store = this.store;
    const reply = (code: number, obj: Obj) => send(res, code, table && obj.kind !== 'Status' ? toTable(t, [obj], String(store.currentRv()), Date.now()) : obj, store.lastWarnings);
    store.lastWarnings = [];
    switch (req.method) {
      case 'GET': {
        if (r.watchPrefix || q.get('watch') === 'true' || q.get('watch') === '1') return this.watch(req, res, r, q, table);
        if (name !== undefined) return reply(200, store.get(t, ns, name));
        const list = store.list(t, ns, {
          labelSelector: q.get('labelSelector'),
          fieldSelector: q.get('fieldSelector'),
          limit: q.has('limit') ? Number(q.get('limit')) : undefined,
          continueToken: q.get('continue'),
        });
        if (table) return send(res, 200, toTable(t, list.items, list.metadata.resourceVersion, Date.now(), list.metadata.continue));
        return send(res, 200, list);
      }
      case 'POST': {
        if (name !== undefined) throw methodNotAllowed(`the server does not allow this method on the requested resource`);
        if (t.namespaced && !ns) throw methodNotAllowed('the server does not allow this method on the requested resource: a namespace is required');
        let body = parseBody(await readBody(req), contentType);
        if (isPlainObject(body)) {
          const withNs = t.namespaced ? { ...body, metadata: { ...(body.metadata ?? {}), namespace: ns } } : body;
          body = await admitMutating(store, t, ns, withNs, undefined, 'CREATE', this.opts.resolveService, writeOpts.dryRun ?? false);
        }
        return reply(201, store.create(t, ns, body, writeOpts));
      }
      case 'PUT': {
        if (name === undefined) throw methodNotAllowed('the server does not allow this method on the requested resource');
        let body = parseBody(await readBody(req), contentType);
        if (isPlainObject(body) && !sub) {
          body = await admitMutating(store, t, ns, body, store.get(t, ns, name), 'UPDATE', this.opts.resolveService, writeOpts.dryRun ?? false);
        }
        return reply(200, store.update(t, ns, name, body, writeOpts, sub));
      }
      case 'PATCH': {
        if (name === undefined) throw methodNotAllowed('the server does not allow this method on the requested resource');
        const type = patchTypeOf(contentType);
        const text = await readBody(req);
        const patch = type === 'apply' ? parseBody(text, 'application/yaml') : parseBody(text, 'application/json');
        const existed = (() => {
          try {
            store.get(t, ns, name);
            return true;
          } catch {
            return false;
          }
        })();
        const out = store.patch(t, ns, name, type, patch, writeOpts, sub);
        return reply(existed ? 200 : 201, out);
      }
      case 'DELETE': {
        const body = parseBody(await readBody(req), contentType);
        const opts: Obj = isPlainObject(body) ? body : {};
        const policy = q.get('propagationPolicy') ?? opts.propagationPolicy ?? (opts.orphanDependents === true ? 'Orphan' : undefined);
        const dryRun = q.getAll('dryRun').includes('All') || (Array.isArray(opts.dryRun) && opts.dryRun.includes('All'));
        if (name === undefined) {
          const list = store.deleteCollection(t, ns, {
            labelSelector: q.get('labelSelector'),
            fieldSelector: q.get('fieldSelector'),
            propagationPolicy: policy,
            dryRun,
          });
          return send(res, 200, list);
        }
        const out = store.delete(t, ns, name, { propagationPolicy: policy, preconditions: opts.preconditions, dryRun });
        let stillThere = false;
        try {
          stillThere = store.get(t, ns, name).metadata.uid === out.metadata.uid;
        } catch {
          stillThere = false;
        }
        return reply(stillThere && !dryRun ? 202 : 200, out);
      }
      default:
        throw methodNotAllowed(`method ${req.method} is not allowed`);
    }
  }

  private async serveScale(req: http.IncomingMessage, res: http.ServerResponse, r: ResourceRequest, q: URLSearchParams): Promise<void> {
    const { type: t, namespace: ns, name } = r;
    const opts: WriteOptions = { fieldManager: q.get('fieldManager') ?? undefined, dryRun: q.getAll('dryRun').includes('All') };
    const contentType = String(req.headers['content-type'] ?? 'application/json');
    if (req.method === 'GET') return send(res, 200, this.store.getScale(t, ns, name!));
    if (req.method === 'PUT') return send(res, 200, this.store.updateScale(t, ns, name!, parseBody(await readBody(req), contentType), opts));
    if (req.method === 'PATCH') {
      const type = patchTypeOf(contentType);
      const body = parseBody(await readBody(req), type === 'apply' ? 'application/yaml' : 'application/json');
      return send(res, 200, this.store.updateScale(t, ns, name!, body, opts, type));
    }
    throw methodNotAllowed(`method ${req.method} is not allowed on the scale subresource`);
  }

  /**
   * Streams watch events as JSON lines: the current state (no resourceVersion or "0") or the
   * history after `resourceVersion`, then live changes. Label and field selectors turn objects
   * moving in or out of the selection into ADDED / DELETED, as the real server does.
   */
  private watch(req: http.IncomingMessage, res: http.ServerResponse, r: ResourceRequest, q: URLSearchParams, table: boolean): void {
    const { type: t } = r;
    const ns = r.namespace;
    const store = this.store;
    const labelSel = parseLabelSelector(q.get('labelSelector'));
    const fieldSel = parseFieldSelector(q.get('fieldSelector'), t.kind, t.selectableFields);
    const nameSel = r.name;
    const matches = (o: Obj | undefined) =>
      o !== undefined && (!ns || o.metadata.namespace === ns) && (!nameSel || o.metadata.name === nameSel) && labelSel(o.metadata.labels ?? {}) && fieldSel(o);
    const rvParam = q.get('resourceVersion');
    const bookmarks = q.get('allowWatchBookmarks') === 'true';
    const sendInitial = q.get('sendInitialEvents') === 'true';
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache' });
    res.flushHeaders();
    const write = (type: string, object: Obj) => {
      const o = table && type !== 'ERROR' && type !== 'BOOKMARK' ? toTable(t, [object], object.metadata.resourceVersion, Date.now()) : object;
      res.write(`${JSON.stringify({ type, object: o })}\n`);
    };
    const bookmark = (initialEnd = false) => {
      const metadata: Obj = { resourceVersion: String(store.currentRv()) };
      if (initialEnd) metadata.annotations = { 'k8s.io/initial-events-end': 'true' };
      write('BOOKMARK', { kind: t.kind, apiVersion: t.group ? `${t.group}/${t.version}` : t.version, metadata });
    };
    const toEvent = (ev: StoreEvent): [string, Obj] | undefined => {
      const now = matches(ev.object);
      if (ev.type !== 'MODIFIED' || ev.old === undefined) return now ? [ev.type, ev.object] : undefined;
      const before = matches(ev.old);
      if (now && before) return ['MODIFIED', ev.object];
      if (now) return ['ADDED', ev.object];
      if (before) return ['DELETED', ev.object];
      return undefined;
    };
    let initial: StoreEvent[];
    let since: number;
    try {
      if (!rvParam || rvParam === '0' || sendInitial) {
        initial = store.currentAsEvents(t, ns);
        since = store.currentRv();
      } else {
        since = Number(rvParam);
        if (!Number.isInteger(since) || since < 0) throw badRequest(`invalid resource version: ${rvParam}`);
        initial = store.eventsSince(t, since);
      }
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError(500, 'InternalError', String(e));
      write('ERROR', err.toStatus());
      res.end();
      return;
    }
    for (const ev of initial) {
      const out = toEvent(ev);
      if (out) write(out[0], store.present(t, out[1]));
    }
    if (bookmarks) bookmark(sendInitial);
    const id = `${t.group}/${t.plural}`;
    const unsubscribe = store.subscribe((ev) => {
      if (ev.resource !== id || ev.rv <= since) return;
      const out = toEvent(ev);
      if (out) write(out[0], store.present(t, out[1]));
    });
    const timers: NodeJS.Timeout[] = [];
    if (bookmarks) timers.push(setInterval(() => bookmark(), this.bookmarkIntervalMs));
    const timeout = Number(q.get('timeoutSeconds'));
    const cleanup = () => {
      unsubscribe();
      for (const tm of timers) clearInterval(tm);
      this.watches.delete(end);
      this.watchSockets.delete(drop);
    };
    const end = () => {
      cleanup();
      if (!res.writableEnded) res.end();
    };
    // No final chunk: the client sees the connection break mid-stream.
    const drop = () => {
      cleanup();
      res.socket?.destroy();
    };
    if (timeout > 0) timers.push(setTimeout(end, timeout * 1000));
    this.watches.add(end);
    this.watchSockets.add(drop);
    // The response's 'close' fires when the client goes away (the request's may fire on body end).
    res.on('close', end);
  }
}

/** Starts a server on a free 127.0.0.1 port. */
export async function startKubeApiServer(opts: KubeApiServerOptions = {}): Promise<KubeApiServer> {
  const s = new KubeApiServer(opts);
  await s.start();
  return s;
}
