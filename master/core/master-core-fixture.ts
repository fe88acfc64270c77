// Small builders for driving MasterCore in tests and benchmarks: requests with every field set.
import type { PutStartRequest__Output } from '../../proto/gen/store/PutStartRequest.js';
import type { ReplicateConfig__Output } from '../../proto/gen/store/ReplicateConfig.js';
import type { MasterCoreConfig } from './master-core.js';
import { defaultMasterCoreConfig, MasterCore, SeededRng } from './master-core.js';

export const MEMORY = 0;
export const DISK = 1;

export function makeCore(overrides: Partial<MasterCoreConfig> = {}, seed = 1): MasterCore {
  return new MasterCore({ ...defaultMasterCoreConfig, ...overrides }, new SeededRng(seed));
}

export function mountReq(name: string, size: number, clientId = 'client-a', buffer = 0x10000000, teEndpoint = '', incarnation = 0) {
  return { buffer, size, segment_name: name, client_id: clientId, segment_id: '', te_endpoint: teEndpoint, protocol: '', incarnation };
}

export function putReq(key: string, slices: number[] | number, config: Partial<ReplicateConfig__Output> = {}): PutStartRequest__Output {
  const slice_lengths = typeof slices === 'number' ? [slices] : slices;
  return {
    key,
    value_length: slice_lengths.reduce((a, b) => a + b, 0),
    config: { replica_num: 1, with_soft_pin: false, with_hard_pin: false, preferred_segment: '', ...config },
    slice_lengths,
  };
}

/** PutStart + PutEnd; throws if either fails. */
export function putObject(core: MasterCore, key: string, slices: number[] | number, now: number, config: Partial<ReplicateConfig__Output> = {}): void {
  const start = core.putStart(putReq(key, slices, config), now);
  if (start.status_code !== 0) throw new Error(`putStart(${key}) failed: ${start.status_code}`);
  const end = core.putEnd({ key, replica_type: MEMORY, slice_checksums: [] }, now);
  if (end.status_code !== 0) throw new Error(`putEnd(${key}) failed: ${end.status_code}`);
}

/** Segment name -> used bytes, for asserting that nothing changed. */
export function usage(core: MasterCore): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of core.segmentsDetail()) out[s.segment_name] = s.allocator_used_bytes;
  return out;
}
