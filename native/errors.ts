// Typed errors of the native layer: the addon throws/rejects with an Error carrying `code`;
// these classes keep that code, the original as `cause`, and let callers use instanceof.

export const TransferErrorCode = {
  ADDRESS_OUT_OF_RANGE: 'ADDRESS_OUT_OF_RANGE',
  TRANSFER_FAILED: 'TRANSFER_FAILED',
  TIMEOUT: 'TIMEOUT',
  CONNECTION_FAILED: 'CONNECTION_FAILED',
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  /** The remote region is not the registration the op named (`incarnation`): nothing moved. */
  STALE_REGION: 'STALE_REGION',
  /** The remote region's write fence refused the op's `generation`: nothing written. */
  FENCED: 'FENCED',
  /**
   * The cluster secret's handshake failed with the peer (authSecret): it has a different secret,
   * none while this engine has one, or one while this engine has none. Nothing moved.
   */
  UNAUTHENTICATED: 'UNAUTHENTICATED',
} as const;
export type TransferErrorCode = (typeof TransferErrorCode)[keyof typeof TransferErrorCode];

export const MemoryErrorCode = {
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  HUGEPAGE_UNAVAILABLE: 'HUGEPAGE_UNAVAILABLE',
  MAP_FAILED: 'MAP_FAILED',
  NOT_FOUND: 'NOT_FOUND',
  /** The machine cannot back the region's pages (populate). */
  OUT_OF_MEMORY: 'OUT_OF_MEMORY',
} as const;
export type MemoryErrorCode = (typeof MemoryErrorCode)[keyof typeof MemoryErrorCode];

function codeOf(e: unknown, fallback: string): string {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : fallback;
}

export class TransferError extends Error {
  override readonly name = 'TransferError';
  /**
   * The remote endpoints whose chunks failed on the peer's side or on the path to it (connect
   * refused or timed out, I/O timeout, reset, ADDRESS_OUT_OF_RANGE / STALE_REGION / FENCED from
   * the peer), each once; empty for failures on this side (bad arguments, a bad local range, the
   * engine closed).
   */
  readonly endpoints: string[];
  constructor(
    readonly code: TransferErrorCode,
    message: string,
    options?: { cause?: unknown; endpoints?: string[] },
  ) {
    super(message, options);
    this.endpoints = options?.endpoints ?? [];
  }
  static from(e: unknown): TransferError {
    if (e instanceof TransferError) return e;
    const code = codeOf(e, TransferErrorCode.TRANSFER_FAILED) as TransferErrorCode;
    return new TransferError(code, messageOf(e), { cause: e, endpoints: endpointsOf(e) });
  }
}

function endpointsOf(e: unknown): string[] {
  const list = (e as { endpoints?: unknown } | null)?.endpoints;
  return Array.isArray(list) ? list.filter((x): x is string => typeof x === 'string') : [];
}

/** The message of an Error from any realm (the addon's errors fail `instanceof Error` inside a vm context). */
function messageOf(e: unknown): string {
  const m = (e as { message?: unknown } | null)?.message;
  return typeof m === 'string' ? m : String(e);
}

export class MemoryError extends Error {
  override readonly name = 'MemoryError';
  constructor(
    readonly code: MemoryErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
  static from(e: unknown): MemoryError {
    if (e instanceof MemoryError) return e;
    const code = codeOf(e, MemoryErrorCode.MAP_FAILED) as MemoryErrorCode;
    return new MemoryError(code, messageOf(e), { cause: e });
  }
}

export const ChecksumErrorCode = {
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
} as const;
export type ChecksumErrorCode = (typeof ChecksumErrorCode)[keyof typeof ChecksumErrorCode];

export class ChecksumError extends Error {
  override readonly name = 'ChecksumError';
  constructor(
    readonly code: ChecksumErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
  static from(e: unknown): ChecksumError {
    if (e instanceof ChecksumError) return e;
    const code = codeOf(e, ChecksumErrorCode.INVALID_ARGUMENT) as ChecksumErrorCode;
    return new ChecksumError(code, messageOf(e), { cause: e });
  }
}
