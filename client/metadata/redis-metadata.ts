// Redis metadata backend: `redis://[:password@]h:p[/db]` (ioredis).
import { Redis } from 'ioredis';
import { parseDescriptor, segmentKey, type MetadataStore, type SegmentDescriptor } from './metadata-store.js';

export class RedisMetadataStore implements MetadataStore {
  readonly kind = 'redis';
  private readonly client: Redis;

  constructor(address: string, timeoutMs = 5000) {
    if (!/^rediss?:\/\/[^/]/.test(address)) throw new Error(`invalid Redis address "${address}": expected redis://host:port`);
    // Fail requests instead of queueing them forever while the server is away.
    this.client = new Redis(address, { connectTimeout: timeoutMs, maxRetriesPerRequest: 2, lazyConnect: false });
    this.client.on('error', () => {}); // surfaced through the failing command instead
  }

  async publish(segmentName: string, descriptor: SegmentDescriptor): Promise<void> {
    await this.client.set(segmentKey(segmentName), JSON.stringify(descriptor));
  }

  async lookup(segmentName: string): Promise<SegmentDescriptor | null> {
    const key = segmentKey(segmentName);
    const text = await this.client.get(key);
    return text === null ? null : parseDescriptor(key, text);
  }

  async remove(segmentName: string): Promise<void> {
    await this.client.del(segmentKey(segmentName));
  }

  async close(): Promise<void> {
    await this.client.quit().catch(() => this.client.disconnect());
  }
}
