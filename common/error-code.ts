// The one ErrorCode enum, re-exported from the types generated from proto/store_master.proto,
// with helpers to name a code and to test for success.
import { ErrorCode } from '../proto/gen/store/ErrorCode.js';

export { ErrorCode };
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

const names = new Map<number, string>(Object.entries(ErrorCode).map(([name, code]) => [code, name]));

/** The enum member's name for a numeric status code, e.g. -300 -> "NO_AVAILABLE_HANDLE". */
export function errorCodeName(code: number): string {
  return names.get(code) ?? `UNKNOWN_ERROR(${code})`;
}

export function isOk(code: number): boolean {
  return code === ErrorCode.OK;
}
