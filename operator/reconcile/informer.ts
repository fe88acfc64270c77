// List+watch of one kind, keeping a local cache and calling back on every change: lists, then
// watches from the list's resourceVersion (with bookmarks), re-lists when the watch expires
// (410 Gone), backs off on errors, and resyncs (replays every cached object) periodically.
import type { KubernetesObject } from '@kubernetes/client-node';
import { KubeApiError, type KubeApi, type WatchEvent } from './kube-client.js';

export interface InformerOptions {
  kind: string;
  namespace?: string;
  labelSelector?: string;
  resyncMs: number;
  onChange: (obj: KubernetesObject, type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'RESYNC') => void;
  log: (m: string) => void;
}

const keyOf = (o: KubernetesObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

export class Informer {
  readonly cache = new Map<string, KubernetesObject>();
  private readonly abort = new AbortController();
  private synced = false;
  private syncWaiters: (() => void)[] = [];

  constructor(private readonly api: KubeApi, private readonly opts: InformerOptions) {}

  get(namespace: string, name: string): KubernetesObject | undefined {
    return this.cache.get(`${namespace}/${name}`);
  }
  list(): KubernetesObject[] {
    return [...this.cache.values()];
  }
  hasSynced(): Promise<void> {
    return this.synced ? Promise.resolve() : new Promise((r) => this.syncWaiters.push(r));
  }

  start(): void {
    void this.run();
    const t = setInterval(() => {
      for (const o of this.cache.values()) this.opts.onChange(o, 'RESYNC');
    }, this.opts.resyncMs);
    t.unref();
    this.abort.signal.addEventListener('abort', () => clearInterval(t));
  }

  stop(): void {
    this.abort.abort();
  }

  private async run(): Promise<void> {
    let failures = 0;
    const ref = { kind: this.opts.kind, namespace: this.opts.namespace };
    while (!this.abort.signal.aborted) {
      try {
        const list = await this.api.list(ref, this.opts.labelSelector);
        const seen = new Set<string>();
        for (const o of list.items) {
          seen.add(keyOf(o));
          const prev = this.cache.get(keyOf(o));
          this.cache.set(keyOf(o), o);
          if (!prev || prev.metadata?.resourceVersion !== o.metadata?.resourceVersion) this.opts.onChange(o, prev ? 'MODIFIED' : 'ADDED');
        }
        for (const [k, o] of this.cache) if (!seen.has(k)) { this.cache.delete(k); this.opts.onChange(o, 'DELETED'); }
        if (!this.synced) { this.synced = true; this.syncWaiters.splice(0).forEach((r) => r()); }
        let rv = list.resourceVersion;
        failures = 0;
        // Keep watching from the last seen version until the server says it is too old.
        while (!this.abort.signal.aborted) {
          let gone = false;
          await this.api.watch(ref, rv, (e: WatchEvent) => {
            if (e.type === 'ERROR') {
              const status = e.object as unknown as { code?: number; message?: string };
              if (status.code === 410) gone = true;
              else this.opts.log(`watch ${this.opts.kind}: ${status.message ?? 'error event'}`);
              return;
            }
            rv = e.object.metadata?.resourceVersion ?? rv;
            if (e.type === 'BOOKMARK') return;
            if (e.type === 'DELETED') this.cache.delete(keyOf(e.object));
            else this.cache.set(keyOf(e.object), e.object);
            this.opts.onChange(e.object, e.type);
          }, this.abort.signal);
          if (gone) break;
        }
      } catch (e) {
        if (this.abort.signal.aborted) return;
        if (!(e instanceof KubeApiError && e.gone)) {
          failures++;
          this.opts.log(`informer ${this.opts.kind}: ${(e as Error).message}; retrying`);
          await sleep(Math.min(30_000, 500 * 2 ** Math.min(failures, 6)), this.abort.signal);
        }
      }
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}
