// Peer-handshake metadata (`metadata_server` = "P2PHANDSHAKE"): no metadata service at all. A
// segment's name is the host:port of the transfer engine serving it, so a lookup is a parse.
import { parseHostPort, type MetadataStore, type SegmentDescriptor } from './metadata-store.js';

export const P2P_HANDSHAKE = 'P2PHANDSHAKE';

export class P2pMetadataStore implements MetadataStore {
  readonly kind = 'p2p';
  private readonly known = new Map<string, SegmentDescriptor>();

  async publish(segmentName: string, descriptor: SegmentDescriptor): Promise<void> {
    // The name must itself be the endpoint, or peers could not find the segment.
    if (segmentName !== descriptor.te_endpoint) {
      throw new Error(`with P2PHANDSHAKE the segment name must be the engine endpoint: "${segmentName}" != "${descriptor.te_endpoint}"`);
    }
    this.known.set(segmentName, descriptor);
  }

  async lookup(segmentName: string): Promise<SegmentDescriptor | null> {
    const own = this.known.get(segmentName);
    if (own) return own;
    parseHostPort(segmentName);
    return { te_endpoint: segmentName, protocol: 'tcp', buffer: 0, size: 0 };
  }

  async remove(segmentName: string): Promise<void> {
    this.known.delete(segmentName);
  }

  async close(): Promise<void> {}
}
