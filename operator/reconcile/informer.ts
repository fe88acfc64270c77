// A cache of one kind kept by @kubernetes/client-node's ListWatch (list, then watch from the
// list's resourceVersion; a watch the server ends is resumed from the last version seen, a 410
// Gone relists), plus what ListWatch leaves to its user: restarting after an error (a dropped
// connection, a failed list) with exponential backoff, watch bookmarks, a periodic resync that
// replays every cached object, and a promise for the first complete list.
import { every, realClock, type Cancel, type Clock } from '../../common/clock.js';
import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import type { KubeClient } from './kube-client.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'RESYNC';

export interface InformerOptions {
  kind: string;
  namespace?: string;
  labelSelector?: string;
  resyncMs: number;
  onChange: (obj: KubernetesObject, type: ChangeType) => void;
  log: (m: string) => void;
  /** Delay before the n-th consecutive restart after an error (default 0.5 s doubling, at most 30 s). */
  backoffMs?: (failures: number) => number;
  /** Server-side timeout of each watch request (the server ends it, the informer resumes). */
  watchTimeoutSeconds?: number;
  /** Time of resyncs and restarts (default the real clock). */
  clock?: Clock;
}

const defaultBackoff = (failures: number) => Math.min(30_000, 500 * 2 ** Math.min(failures - 1, 6));

/** Asks for bookmarks and a server-side timeout on every watch ListWatch starts. */
class BookmarkWatch extends Watch {
  constructor(
    kc: KubeConfig,
    private readonly timeoutSeconds: number,
  ) {
    super(kc);
  }
  override watch(
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, obj: any, watchObj?: any) => void,
    done: (err: any) => void,
  ): Promise<AbortController> {
    return super.watch(path, { ...query, allowWatchBookmarks: true, timeoutSeconds: this.timeoutSeconds }, callback, done);
  }
}

export class Informer {
  private lw: ListWatch<KubernetesObject> | undefined;
  private stopped = false;
  private failures = 0;
  private synced = false;
  private listedSinceStart = false;
  private readonly syncWaiters: (() => void)[] = [];
  private resyncTimer: Cancel | undefined;
  private restartTimer: Cancel | undefined;
  private readonly clock: Clock;

  constructor(
    private readonly kc: KubeConfig,
    private readonly api: KubeClient,
    private readonly opts: InformerOptions,
  ) {
    this.clock = opts.clock ?? realClock;
  }

  get(namespace: string, name: string): KubernetesObject | undefined {
    return this.lw?.get(name, namespace || undefined);
  }
  list(): KubernetesObject[] {
    return [...(this.lw?.list() ?? [])];
  }
  /** Resolves once the cache holds a complete list. */
  hasSynced(): Promise<void> {
    return this.synced ? Promise.resolve() : new Promise((r) => this.syncWaiters.push(r));
  }

  start(): void {
    this.resyncTimer = every(this.clock, this.opts.resyncMs, () => {
      for (const o of this.list()) this.opts.onChange(o, 'RESYNC');
    });
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.resyncTimer?.();
    this.restartTimer?.();
    void this.lw?.stop();
  }

  private listFn = async (): Promise<KubernetesListObject<KubernetesObject>> => {
    const { kind, namespace, labelSelector } = this.opts;
    const list = await this.api.list({ kind, namespace }, labelSelector);
    this.listedSinceStart = true;
    this.failures = 0;
    return { apiVersion: 'v1', kind: `${kind}List`, metadata: { resourceVersion: list.resourceVersion }, items: list.items };
  };

  private async connect(): Promise<void> {
    try {
      if (!this.lw) {
        const path = await this.api.collectionPath(this.opts.kind, this.opts.namespace);
        const lw = new ListWatch<KubernetesObject>(path, new BookmarkWatch(this.kc, this.opts.watchTimeoutSeconds ?? 300), this.listFn, false, this.opts.labelSelector);
        lw.on('add', (o) => this.event(o, 'ADDED'));
        lw.on('update', (o) => this.event(o, 'MODIFIED'));
        lw.on('delete', (o) => this.event(o, 'DELETED'));
        // ListWatch stops on any error but a 410 (which it relists by itself): restart it.
        lw.on('error', (err) => this.restart(err));
        this.lw = lw;
      }
      if (this.stopped) return;
      this.listedSinceStart = false;
      await this.lw.start();
      if (this.listedSinceStart && !this.synced) {
        this.synced = true;
        this.syncWaiters.splice(0).forEach((r) => r());
      }
    } catch (e) {
      this.restart(e);
    }
  }

  private event(obj: KubernetesObject, type: ChangeType): void {
    this.failures = 0;
    this.opts.onChange(obj, type);
  }

  private restart(err: unknown): void {
    if (this.stopped) return;
    this.failures++;
    const delay = (this.opts.backoffMs ?? defaultBackoff)(this.failures);
    this.opts.log(`informer ${this.opts.kind}: ${(err as Error)?.message ?? String(err)}; retrying in ${delay}ms`);
    this.restartTimer?.();
    this.restartTimer = this.clock.schedule(delay, () => void this.connect());
  }
}
