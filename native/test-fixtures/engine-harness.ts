// Test helper: the state most engine tests share, set up and torn down with the test file: a
// local region of `localSize` bytes, and lists of the engines and peer processes a test started
// (closed and stopped after the file's tests).
import { mapMemory, type MemoryRegion, type TransferEngine } from '../index.js';
import { ensureAddon } from './ensure-addon.js';
import type { RegionPeer } from './region-peer.js';

export interface EngineHarness {
  /** The local region (valid inside tests). */
  readonly local: MemoryRegion;
  readonly engines: TransferEngine[];
  readonly peers: RegionPeer[];
}

export function engineHarness(localSize: number): EngineHarness {
  let local: MemoryRegion | undefined;
  const h = {
    get local(): MemoryRegion {
      if (!local) throw new Error('engineHarness: the local region exists only inside tests');
      return local;
    },
    engines: [] as TransferEngine[],
    peers: [] as RegionPeer[],
  };
  beforeAll(() => {
    ensureAddon();
    local = mapMemory({ size: localSize });
  });
  afterAll(async () => {
    for (const e of h.engines) e.close();
    local?.release();
    for (const p of h.peers) await p.stop();
  });
  return h;
}
