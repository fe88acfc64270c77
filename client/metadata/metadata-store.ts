// The transfer-engine metadata service seen by a client: where a segment's bytes can be reached.
// One interface, one file per backend (HTTP metadata server, etcd, Redis, peer handshake); the
// `metadata_server` setting picks the backend by its form (see openMetadataStore).

/** What a client publishes for each segment it mounts, under the segment's name. */
export interface SegmentDescriptor {
  te_endpoint: string; // host:port of the transfer engine serving the segment
  protocol: string; // tcp (rdma where a device exists)
  buffer: number; // base address of the segment in its owner's registered memory
  size: number; // bytes
}

export interface MetadataStore {
  /** Backend name for logs: http, etcd, redis, p2p. */
  readonly kind: string;
  publish(segmentName: string, descriptor: SegmentDescriptor): Promise<void>;
  /** The descriptor published for segmentName, or null when nobody published it. */
  lookup(segmentName: string): Promise<SegmentDescriptor | null>;
  remove(segmentName: string): Promise<void>;
  close(): Promise<void>;
}

/** The key a segment is stored under: clusters sharing one metadata service are kept apart. */
export function segmentKey(segmentName: string, clusterId = process.env.MC_STORE_CLUSTER_ID): string {
  return clusterId ? `store/${clusterId}/segments/${segmentName}` : `store/segments/${segmentName}`;
}

/** Parses a stored descriptor; a malformed value is an error naming the key, never a wrong endpoint. */
export function parseDescriptor(key: string, text: string): SegmentDescriptor {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`metadata for ${key} is not JSON: ${JSON.stringify(text.slice(0, 80))}`, { cause: e });
  }
  const d = v as Partial<SegmentDescriptor>;
  if (typeof d?.te_endpoint !== 'string' || typeof d.protocol !== 'string' || typeof d.buffer !== 'number' || typeof d.size !== 'number') {
    throw new Error(`metadata for ${key} lacks te_endpoint/protocol/buffer/size: ${text.slice(0, 200)}`);
  }
  return { te_endpoint: d.te_endpoint, protocol: d.protocol, buffer: d.buffer, size: d.size };
}
