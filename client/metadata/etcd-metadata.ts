// etcd metadata backend: `etcd://h:p[;h:p...]` (etcd3 client, v3 API).
import { Etcd3 } from 'etcd3';
import { joinHostPort, parseHostPort } from '../../common/host-port.js';
import { parseDescriptor, segmentKey, type MetadataStore, type SegmentDescriptor } from './metadata-store.js';

/** "etcd://a:1;b:2" -> ["http://a:1", "http://b:2"]. */
export function parseEtcdAddress(address: string): string[] {
  const rest = address.replace(/^etcd:\/\//, '');
  const hosts = rest
    .split(/[;,]/)
    .map((s) => s.trim())
    .filter(Boolean);
  if (hosts.length === 0) throw new Error(`invalid etcd address "${address}": expected etcd://host:port[;host:port]`);
  return hosts.map((h) => {
    const { host, port } = parseHostPort(h);
    return `http://${joinHostPort(host, port)}`;
  });
}

export class EtcdMetadataStore implements MetadataStore {
  readonly kind = 'etcd';
  private readonly client: Etcd3;

  constructor(address: string, timeoutMs = 5000) {
    this.client = new Etcd3({ hosts: parseEtcdAddress(address), dialTimeout: timeoutMs });
  }

  async publish(segmentName: string, descriptor: SegmentDescriptor): Promise<void> {
    await this.client.put(segmentKey(segmentName)).value(JSON.stringify(descriptor));
  }

  async lookup(segmentName: string): Promise<SegmentDescriptor | null> {
    const key = segmentKey(segmentName);
    const text = await this.client.get(key).string();
    return text === null ? null : parseDescriptor(key, text);
  }

  async remove(segmentName: string): Promise<void> {
    await this.client.delete().key(segmentKey(segmentName));
  }

  async close(): Promise<void> {
    this.client.close();
  }
}
