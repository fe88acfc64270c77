// Re-reads a server's TLS files on an interval of the injected clock and applies them when their
// bytes changed (cert-manager writes a renewed certificate into the mounted Secret; the kubelet
// swaps the files atomically within about a minute). A renewal that does not check (half-written,
// key of another certificate) is logged and skipped: the server keeps serving the last good one.
// Polling rather than fs.watch: a Secret volume swaps a symlinked directory, which inotify on the
// file does not report, and polling three small files once every few seconds costs nothing.
import { readFileSync } from 'node:fs';
import { every, type Cancel, type Clock } from './clock.js';
import { loadServerTls, sameMaterial, type ReadFile, type TlsMaterial, type TlsPaths } from './tls-material.js';

export const TLS_RELOAD_INTERVAL_MS = 10_000;

export interface TlsReloaderOptions {
  paths: TlsPaths;
  /** The material in use now (checked at startup). */
  current: TlsMaterial;
  /** Applies renewed material to the listeners. */
  apply: (m: TlsMaterial) => void;
  clock: Clock;
  intervalMs?: number;
  log: { info(m: string): void; warn(m: string): void };
  read?: ReadFile;
}

export class TlsReloader {
  private current: TlsMaterial;
  private cancel: Cancel | undefined;
  private lastError = '';
  /** Renewals applied and renewals refused, for metrics and tests. */
  reloads = 0;
  failures = 0;

  constructor(private readonly o: TlsReloaderOptions) {
    this.current = o.current;
  }

  start(): void {
    this.cancel ??= every(this.o.clock, this.o.intervalMs ?? TLS_RELOAD_INTERVAL_MS, () => this.check());
  }

  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
  }

  /** Whether the files still hold the bytes in use (read only: parsing and checking cost 100 times more). */
  private unchanged(): boolean {
    const read = this.o.read ?? ((p: string) => readFileSync(p));
    const same = (path: string | undefined, bytes: Buffer | undefined) => (path ? bytes !== undefined && read(path).equals(bytes) : bytes === undefined);
    try {
      return same(this.o.paths.cert, this.current.cert) && same(this.o.paths.key, this.current.key) && same(this.o.paths.ca, this.current.ca);
    } catch {
      return false; // unreadable now: the full load below says why
    }
  }

  /** One look at the files; true when new material was applied. */
  check(): boolean {
    if (this.lastError === '' && this.unchanged()) return false;
    let next: TlsMaterial | undefined;
    try {
      next = loadServerTls(this.o.paths, this.o.read);
    } catch (e) {
      const msg = (e as Error).message;
      this.failures++;
      if (msg !== this.lastError) this.o.log.warn(`TLS files not reloaded, still serving the previous certificate: ${msg}`);
      this.lastError = msg;
      return false;
    }
    this.lastError = '';
    if (next === undefined || sameMaterial(next, this.current)) return false;
    this.current = next;
    this.o.apply(next);
    this.reloads++;
    const until = next.certExpiresMs === undefined ? '' : ` (valid until ${new Date(next.certExpiresMs).toISOString()})`;
    this.o.log.info(`TLS certificate reloaded from ${this.o.paths.cert}${until}`);
    return true;
  }
}
