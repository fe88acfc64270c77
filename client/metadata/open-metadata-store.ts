// Picks the metadata backend from the `metadata_server` setting's form.
import { EtcdMetadataStore } from './etcd-metadata.js';
import { HttpMetadataStore } from './http-metadata.js';
import type { MetadataStore } from './metadata-store.js';
import { P2P_HANDSHAKE, P2pMetadataStore } from './p2p-metadata.js';
import { RedisMetadataStore } from './redis-metadata.js';

export function openMetadataStore(address: string): MetadataStore {
  const a = address.trim();
  if (a === P2P_HANDSHAKE) return new P2pMetadataStore();
  if (/^https?:\/\//i.test(a)) return new HttpMetadataStore(a);
  if (/^etcd:\/\//i.test(a)) return new EtcdMetadataStore(a);
  if (/^rediss?:\/\//i.test(a)) return new RedisMetadataStore(a);
  throw new Error(
    `invalid metadata_server "${address}": expected http://host:port/metadata, etcd://host:port[;host:port], redis://host:port or P2PHANDSHAKE`,
  );
}
