// Typed errors of the fast master channel. Each sets `name`, keeps `cause`, and carries the
// master address and, where one call failed, the RPC method.
import { ErrorCode } from '../common/error-code.js';

export class MasterChannelError extends Error {
  override name = 'MasterChannelError';
  constructor(
    message: string,
    readonly address: string,
    readonly method?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The connection could not be made or was lost; every call in flight fails with this. */
export class MasterConnectionError extends MasterChannelError {
  override name = 'MasterConnectionError';
}

/** No reply within the request timeout. The master may still have executed the call. */
export class MasterTimeoutError extends MasterChannelError {
  override name = 'MasterTimeoutError';
  constructor(
    address: string,
    method: string,
    readonly timeoutMs: number,
  ) {
    super(`${method} to master ${address} timed out after ${timeoutMs} ms`, address, method);
  }
}

/** The master refused the frame (unknown method, undecodable payload) or broke the framing. */
export class MasterProtocolError extends MasterChannelError {
  override name = 'MasterProtocolError';
}

/** close() was called; the call was not sent or its reply will never be read. */
export class MasterClientClosedError extends MasterChannelError {
  override name = 'MasterClientClosedError';
}

/**
 * The cluster-secret handshake failed: no secret on one side, or different secrets
 * (docs/threat-model.md). Retrying does not help; `code` is ErrorCode.UNAUTHENTICATED.
 */
export class MasterAuthError extends MasterChannelError {
  override name = 'MasterAuthError';
  readonly code = ErrorCode.UNAUTHENTICATED;
}
