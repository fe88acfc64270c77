// Validation of PutStart/UpsertStart requests. A rejected request changes nothing.
import { ErrorCode } from '../../common/error-code.js';
import type { ReplicateConfig__Output } from '../../proto/gen/store/ReplicateConfig.js';

export const MAX_REPLICA_NUM = 32;
export const MAX_SLICES = 1024;
export const MAX_KEY_LENGTH = 4096;

export interface WriteRequest {
  key: string;
  value_length: number;
  config: ReplicateConfig__Output | null;
  slice_lengths: number[];
}

export interface ValidWrite {
  ok: true;
  sliceLengths: number[];
  replicaNum: number;
  softPin: boolean;
  hardPin: boolean;
  preferredSegment: string;
}

export type WriteValidation = ValidWrite | { ok: false; code: number };

export function validateKey(key: unknown): number {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) return ErrorCode.INVALID_KEY;
  return ErrorCode.OK;
}

const bad = Object.freeze({ ok: false as const, code: ErrorCode.INVALID_PARAMS });

export function validateWrite(req: WriteRequest): WriteValidation {
  const keyCode = validateKey(req.key);
  if (keyCode !== ErrorCode.OK) return { ok: false, code: keyCode };
  const total = req.value_length;
  if (!Number.isSafeInteger(total) || total <= 0) return bad;
  const slices = req.slice_lengths;
  if (!Array.isArray(slices) || slices.length === 0 || slices.length > MAX_SLICES) return bad;
  let sum = 0;
  for (const s of slices) {
    if (!Number.isSafeInteger(s) || s <= 0) return bad;
    sum += s;
  }
  if (sum !== total) return bad;
  const cfg = req.config;
  const replicaNum = cfg === null || cfg === undefined || cfg.replica_num === 0 ? 1 : cfg.replica_num;
  if (!Number.isSafeInteger(replicaNum) || replicaNum < 1 || replicaNum > MAX_REPLICA_NUM) return bad;
  return {
    ok: true,
    sliceLengths: slices.slice(),
    replicaNum,
    softPin: cfg?.with_soft_pin === true,
    hardPin: cfg?.with_hard_pin === true,
    preferredSegment: cfg?.preferred_segment ?? '',
  };
}
