// Typed errors raised by the client library. Each carries the ErrorCode from the proto (numeric, one
// range per subsystem), its name, and the underlying `cause` (an RPC status, a transfer failure...).
import { ErrorCode, errorCodeName } from '../common/error-code.js';
import type { TransferErrorCode } from '../native/errors.js';

export type ErrorCodeNumber = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Base class of every error the client throws on purpose. */
export class StoreError extends Error {
  readonly code: number;
  readonly codeName: string;
  constructor(code: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
    this.code = code;
    this.codeName = errorCodeName(code);
  }

  /**
   * fromCode without a stack trace, for the per-key refusals of a batch (a put batch into a full
   * cache refused while offload copies land: one error per key). Its stack would name only the
   * batch's own frames, and capturing it was 2.0 of the 2.5 us an error costs here (node 20).
   */
  static forItem(code: number, message: string): StoreError {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      return StoreError.fromCode(code, message);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }

  /** The right subclass for a status code returned by the master (or produced locally). */
  static fromCode(code: number, message: string, options?: { cause?: unknown }): StoreError {
    const text = `${message}: ${errorCodeName(code)}`;
    switch (code) {
      case ErrorCode.OBJECT_NOT_FOUND:
        return new ObjectNotFoundError(text, options);
      case ErrorCode.REPLICA_IS_NOT_READY:
        return new ObjectNotReadyError(text, options);
      case ErrorCode.OBJECT_ALREADY_EXISTS:
        return new ObjectExistsError(text, options);
      case ErrorCode.OBJECT_HAS_LEASE:
        return new ObjectLeasedError(text, options);
      case ErrorCode.INVALID_PARAMS:
      case ErrorCode.INVALID_KEY:
      case ErrorCode.RESULT_TOO_LARGE:
        return new InvalidParamsError(text, { ...options, code });
      case ErrorCode.NO_AVAILABLE_HANDLE:
        return new NoSpaceError(text, options);
      case ErrorCode.TRANSFER_FAILED:
      case ErrorCode.ADDRESS_OUT_OF_RANGE:
      case ErrorCode.CHECKSUM_MISMATCH:
        return new TransferError(text, { ...options, code });
      case ErrorCode.LEASE_EXPIRED:
        return new LeaseExpiredError(text, options);
      case ErrorCode.BUFFER_EXHAUSTED:
        return new BufferExhaustedError(text, options);
      case ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS:
        return new UnavailableError(text, options);
      case ErrorCode.UNAUTHENTICATED:
        return new UnauthenticatedError(text, options);
      default:
        return new StoreError(code, text, options);
    }
  }
}

/**
 * The error a store service reported for a dummy client's call: the subclass for `code`, with the
 * service's own message (which names the operation, the key and the code) kept as it is; `where`
 * names the call when the service sent no message.
 */
export function remoteStoreError(code: number, message: string, where: string): StoreError {
  const e = StoreError.fromCode(code, where);
  if (message) e.message = message;
  return e;
}

/** The key does not exist (or has no complete replica). */
export class ObjectNotFoundError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.OBJECT_NOT_FOUND, message, options);
    this.name = 'ObjectNotFoundError';
  }
}

/** The key is being written (PutStart without PutEnd yet): there is no value to read so far. */
export class ObjectNotReadyError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.REPLICA_IS_NOT_READY, message, options);
    this.name = 'ObjectNotReadyError';
  }
}

/** A Put raced another Put of the same key, or the key is already stored (objects are immutable). */
export class ObjectExistsError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.OBJECT_ALREADY_EXISTS, message, options);
    this.name = 'ObjectExistsError';
  }
}

/** Remove refused because a reader holds a lease on the object. */
export class ObjectLeasedError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.OBJECT_HAS_LEASE, message, options);
    this.name = 'ObjectLeasedError';
  }
}

export class InvalidParamsError extends StoreError {
  constructor(message: string, options?: { cause?: unknown; code?: number }) {
    super(options?.code ?? ErrorCode.INVALID_PARAMS, message, options);
    this.name = 'InvalidParamsError';
  }
}

/** The master could not place even one replica. */
export class NoSpaceError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.NO_AVAILABLE_HANDLE, message, options);
    this.name = 'NoSpaceError';
  }
}

/** Moving bytes failed: every replica was unreachable, refused, or timed out. */
export class TransferError extends StoreError {
  constructor(message: string, options?: { cause?: unknown; code?: number }) {
    super(options?.code ?? ErrorCode.TRANSFER_FAILED, message, options);
    this.name = 'TransferError';
  }
}

/** A Get's lease ran out before its read finished: no data is returned. */
export class LeaseExpiredError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.LEASE_EXPIRED, message, options);
    this.name = 'LeaseExpiredError';
  }
}

/** The local buffer pool could not hand out staging space within its caps / timeout. */
export class BufferExhaustedError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.BUFFER_EXHAUSTED, message, options);
    this.name = 'BufferExhaustedError';
  }
}

/**
 * The cluster secret was refused: this process has none, or a different one, than the server it
 * called (docs/threat-model.md). Retrying does not help.
 */
export class UnauthenticatedError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.UNAUTHENTICATED, message, options);
    this.name = 'UnauthenticatedError';
  }
}

/** The operation is not possible in this client's mode or state (pure server, closed, RDMA...). */
export class UnavailableError extends StoreError {
  constructor(message: string, options?: { cause?: unknown; code?: number }) {
    super(options?.code ?? ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, message, options);
    this.name = 'UnavailableError';
  }
}

/**
 * The ErrorCode of each failure of the native transfer engine (native/errors.ts), the one table
 * of it. A remote STALE_REGION (planned before the owner registered the memory again) and FENCED
 * (a write generation the owner refuses) are transfer failures: the caller plans again.
 */
const TRANSFER_ERROR_CODES: Readonly<Record<TransferErrorCode, number>> = {
  ADDRESS_OUT_OF_RANGE: ErrorCode.ADDRESS_OUT_OF_RANGE,
  TRANSFER_FAILED: ErrorCode.TRANSFER_FAILED,
  TIMEOUT: ErrorCode.TRANSFER_FAILED,
  CONNECTION_FAILED: ErrorCode.TRANSFER_FAILED,
  INVALID_ARGUMENT: ErrorCode.TRANSFER_FAILED,
  STALE_REGION: ErrorCode.TRANSFER_FAILED,
  FENCED: ErrorCode.TRANSFER_FAILED,
  UNAUTHENTICATED: ErrorCode.UNAUTHENTICATED,
};

/** The ErrorCode of an engine rejection (by its `code`; anything unknown is TRANSFER_FAILED). */
export function transferErrorCode(e: unknown): number {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' && Object.hasOwn(TRANSFER_ERROR_CODES, c) ? TRANSFER_ERROR_CODES[c as TransferErrorCode] : ErrorCode.TRANSFER_FAILED;
}
