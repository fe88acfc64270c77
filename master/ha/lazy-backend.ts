// An election backend whose implementation is loaded on first use. The k8s backend needs the
// Kubernetes client, an optional dependency of the package: a master on etcd or Redis (or none)
// must start without it, and one on k8s says plainly when it is missing.
import type { AcquireResult, ElectionBackend } from './election-backend.js';

export class LazyBackend implements ElectionBackend {
  private loaded: Promise<ElectionBackend> | undefined;

  constructor(
    readonly description: string,
    private readonly load: () => Promise<ElectionBackend>,
  ) {}

  private backend(): Promise<ElectionBackend> {
    this.loaded ??= this.load().catch((e: NodeJS.ErrnoException) => {
      this.loaded = undefined;
      if (e.code === 'ERR_MODULE_NOT_FOUND')
        throw new Error(`${this.description}: ${e.message}: the k8s backend needs the optional dependencies of kvcache-store (install it without --omit=optional)`);
      throw e;
    });
    return this.loaded;
  }

  async tryAcquire(address: string, ttlMs: number): Promise<AcquireResult> {
    return (await this.backend()).tryAcquire(address, ttlMs);
  }
  async renew(address: string, ttlMs: number): Promise<boolean> {
    return (await this.backend()).renew(address, ttlMs);
  }
  async release(address: string): Promise<void> {
    return (await this.backend()).release(address);
  }
  async readLeader(): Promise<string | undefined> {
    return (await this.backend()).readLeader();
  }
  async putRecord(name: string, value: string, ttlMs?: number): Promise<void> {
    return (await this.backend()).putRecord(name, value, ttlMs);
  }
  async putLeaderRecord(name: string, value: string): Promise<void> {
    return (await this.backend()).putLeaderRecord(name, value);
  }
  async readRecords(): Promise<Map<string, string>> {
    return (await this.backend()).readRecords();
  }
  async onElected(): Promise<void> {
    await (await this.backend()).onElected?.();
  }
  async onDeposed(): Promise<void> {
    await (await this.backend()).onDeposed?.();
  }
  async close(): Promise<void> {
    if (this.loaded) await (await this.loaded.catch(() => undefined))?.close();
  }
}
