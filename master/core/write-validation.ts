// Validation of PutStart/UpsertStart requests, and the key check of every keyed call. A rejected
// request changes nothing.
import { ErrorCode } from '../../common/error-code.js';
import { keyProblem, MAX_KEY_BYTES } from '../../common/key-rules.js';
import type { ReplicateConfig__Output } from '../../proto/gen/store/ReplicateConfig.js';

export const MAX_REPLICA_NUM = 32;
export const MAX_SLICES = 1024;
/** Longest key in UTF-8 bytes (common/key-rules.ts). */
export const MAX_KEY_LENGTH = MAX_KEY_BYTES;

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

/** INVALID_KEY unless `key` is a valid key (the alphabet of common/key-rules.ts), else OK. */
export function validateKey(key: unknown): number {
  return keyProblem(key) === undefined ? ErrorCode.OK : ErrorCode.INVALID_KEY;
}

/**
 * The key check of a call that looks `key` up and found `meta` (undefined: absent). Every key in
 * the table passed validateKey when its object was created, so a found key is valid and only a
 * miss pays for the full check (which decides between INVALID_KEY and not-found). This keeps
 * the check off the hot lookups: the put pair checks its key once, at PutStart.
 */
export function lookedUpKeyCode(key: unknown, meta: object | undefined): number {
  return meta !== undefined ? ErrorCode.OK : validateKey(key);
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
    if (!Number.isSafeInteger(s) || s <= 0) return ErrorCode.INVALID_PARAMS;
    sum += s;
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
