// HTTP metadata backend: `http://host:port/metadata`, e.g. the master's embedded metadata server.
// GET/PUT/DELETE <url>?key=K; GET answers 404 for an unknown key. PUT and DELETE carry the
// cluster secret's per-call header (x-kvstore-auth) when the client has a secret. Over HTTPS with
// the client TLS settings (STORE_TLS_CA_FILE: an http:// URL is then called as https://,
// common/tls-fetch.ts).
import { AUTH_HEADER, signUrl } from '../../common/cluster-secret.js';
import { clientTlsFromEnv, controlFetch } from '../../common/tls-fetch.js';
import type { TlsMaterial } from '../../common/tls-material.js';
import { parseDescriptor, segmentKey, type MetadataStore, type SegmentDescriptor } from './metadata-store.js';

export class HttpMetadataStore implements MetadataStore {
  readonly kind = 'http';
  private readonly base: URL;

  constructor(
    url: string,
    private readonly timeoutMs = 5000,
    private readonly secret?: Buffer,
    private readonly tls: TlsMaterial | undefined = clientTlsFromEnv(),
  ) {
    this.base = new URL(url);
    if (this.base.protocol !== 'http:' && this.base.protocol !== 'https:') {
      throw new Error(`invalid HTTP metadata server "${url}": expected http://host:port/metadata`);
    }
  }

  private url(key: string): string {
    const u = new URL(this.base);
    u.searchParams.set('key', key);
    return u.toString();
  }

  private async call(method: string, key: string, body?: string): Promise<Response> {
    const url = this.url(key);
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.secret !== undefined && method !== 'GET') {
      headers[AUTH_HEADER] = signUrl(this.secret, method, url, body);
    }
    try {
      return await controlFetch(url, { method, body, headers, signal: AbortSignal.timeout(this.timeoutMs) }, this.tls);
    } catch (e) {
      const why = (e as Error & { cause?: Error }).cause?.message;
      throw new Error(`metadata server ${this.base.origin} unreachable (${method} ${key})${why ? `: ${why}` : ''}`, { cause: e });
    }
  }

  async publish(segmentName: string, descriptor: SegmentDescriptor): Promise<void> {
    const key = segmentKey(segmentName);
    const res = await this.call('PUT', key, JSON.stringify(descriptor));
    if (!res.ok) throw new Error(`metadata server refused PUT ${key}: HTTP ${res.status} ${await res.text()}`);
  }

  async lookup(segmentName: string): Promise<SegmentDescriptor | null> {
    const key = segmentKey(segmentName);
    const res = await this.call('GET', key);
    if (res.status === 404) return null;
    const text = await res.text();
    if (!res.ok) throw new Error(`metadata server refused GET ${key}: HTTP ${res.status} ${text}`);
    return parseDescriptor(key, text);
  }

  async remove(segmentName: string): Promise<void> {
    const key = segmentKey(segmentName);
    const res = await this.call('DELETE', key);
    if (!res.ok && res.status !== 404) throw new Error(`metadata server refused DELETE ${key}: HTTP ${res.status} ${await res.text()}`);
  }

  async close(): Promise<void> {}
}
