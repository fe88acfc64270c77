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

/** replica_num as the write means it: absent or 0 is 1. */
export function replicaNumOf(cfg: ReplicateConfig__Output | null | undefined): number {
  return cfg === null || cfg === undefined || cfg.replica_num === 0 ? 1 : cfg.replica_num;
}

/**
 * The checks of validateWrite without building its result (the batch put path reads the fields
 * from the request itself): ErrorCode.OK, or the code validateWrite would return.
 */
export function writeError(req: WriteRequest): number {
  const keyCode = validateKey(req.key);
  if (keyCode !== ErrorCode.OK) return keyCode;
  const total = req.value_length;
  if (!Number.isSafeInteger(total) || total <= 0) return ErrorCode.INVALID_PARAMS;
  const slices = req.slice_lengths;
  if (!Array.isArray(slices) || slices.length === 0 || slices.length > MAX_SLICES) return ErrorCode.INVALID_PARAMS;
  let sum = 0;
  for (let i = 0; i < slices.length; i++) {
    const s = slices[i];
    if (!Number.isSafeInteger(s) || (s as number) <= 0) return ErrorCode.INVALID_PARAMS;
    sum += s as number;
  }
  if (sum !== total) return ErrorCode.INVALID_PARAMS;
  const replicaNum = replicaNumOf(req.config);
  if (!Number.isSafeInteger(replicaNum) || replicaNum < 1 || replicaNum > MAX_REPLICA_NUM) return ErrorCode.INVALID_PARAMS;
  return ErrorCode.OK;
}

export function validateWrite(req: WriteRequest): WriteValidation {
  const code = writeError(req);
  if (code !== ErrorCode.OK) return code === ErrorCode.INVALID_PARAMS ? bad : { ok: false, code };
  const cfg = req.config;
  return {
    ok: true,
    sliceLengths: req.slice_lengths.slice(),
    replicaNum: replicaNumOf(cfg),
    softPin: cfg?.with_soft_pin === true,
    hardPin: cfg?.with_hard_pin === true,
    preferredSegment: cfg?.preferred_segment ?? '',
  };
}
