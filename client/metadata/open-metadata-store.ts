// Picks the metadata backend from the `metadata_server` setting's form.
import { InvalidParamsError } from '../errors.js';
import { metadataServerProblem } from '../setup-config.js';
import { EtcdMetadataStore } from './etcd-metadata.js';
import { HttpMetadataStore } from './http-metadata.js';
import type { MetadataStore } from './metadata-store.js';
import { P2P_HANDSHAKE, P2pMetadataStore } from './p2p-metadata.js';
import { RedisMetadataStore } from './redis-metadata.js';

/**
 * The backend for `address`; InvalidParamsError (naming metadata_server) for a form none accepts.
 * `secret` signs the HTTP backend's writes (the master's embedded metadata server checks them).
 */
export function openMetadataStore(address: string, secret?: Buffer): MetadataStore {
  const problem = metadataServerProblem(address);
  if (problem) throw new InvalidParamsError(problem);
  const a = address.trim();
  if (a === P2P_HANDSHAKE) return new P2pMetadataStore();
  if (/^https?:\/\//i.test(a)) return new HttpMetadataStore(a, undefined, secret);
  if (/^etcd:\/\//i.test(a)) return new EtcdMetadataStore(a);
  return new RedisMetadataStore(a); // the only form left (metadataServerProblem accepts no other)
}
