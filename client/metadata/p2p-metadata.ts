// Peer-handshake metadata (`metadata_server` = "P2PHANDSHAKE"): no metadata service at all. A
// segment's name is the host:port of the transfer engine serving it, optionally followed by
// "/<suffix>" for a client's further segments (`10.0.0.5:12345/2`), so a lookup is a parse.
import { parseHostPort } from '../../common/host-port.js';
import type { MetadataStore, SegmentDescriptor } from './metadata-store.js';

export const P2P_HANDSHAKE = 'P2PHANDSHAKE';

/** The engine endpoint a segment name stands for: the name up to its first "/". */
export function endpointOfSegmentName(segmentName: string): string {
  const slash = segmentName.indexOf('/');
  return slash < 0 ? segmentName : segmentName.slice(0, slash);
}

export class P2pMetadataStore implements MetadataStore {
  readonly kind = 'p2p';
  private readonly known = new Map<string, SegmentDescriptor>();

  async publish(segmentName: string, descriptor: SegmentDescriptor): Promise<void> {
    // The name must start with the endpoint, or peers could not find the segment.
    if (endpointOfSegmentName(segmentName) !== descriptor.te_endpoint) {
      throw new Error(
        `with P2PHANDSHAKE the segment name must be the engine endpoint (or "<endpoint>/<suffix>"): "${segmentName}" does not start with "${descriptor.te_endpoint}"`,
      );
    }
    this.known.set(segmentName, descriptor);
  }

  async lookup(segmentName: string): Promise<SegmentDescriptor | null> {
    const own = this.known.get(segmentName);
    if (own) return own;
    const endpoint = endpointOfSegmentName(segmentName);
    parseHostPort(endpoint);
    return { te_endpoint: endpoint, protocol: 'tcp', buffer: 0, size: 0 };
  }

  async remove(segmentName: string): Promise<void> {
    this.known.delete(segmentName);
  }

  async close(): Promise<void> {}
}
