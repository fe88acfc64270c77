// The `store` CLI's errors and exit codes: every failure ends as one line on stderr and one of the
// codes below, so scripts can tell "not there" from "cannot reach it" from "called wrongly".
// Pure: maps any thrown value (a CLI error, a client StoreError, a master channel error, a fetch
// failure) to its code and its one-line message.
import { ErrorCode } from '../common/error-code.js';
import { StoreError } from '../client/errors.js';
import { MasterAuthError, MasterChannelError } from '../client/master-channel-errors.js';

export const ExitCode = {
  OK: 0,
  /** The key, segment or id does not exist. */
  NOT_FOUND: 1,
  /** Bad command line: unknown command or option, missing or extra argument, bad value, bad key. */
  USAGE: 2,
  /** The master, its HTTP port, the store service or the HA backend cannot be reached (or no leader). */
  UNREACHABLE: 3,
  /** Any other error the store reported (no space, object exists or leased, transfer failure, a refused cluster secret ...). */
  STORE_ERROR: 4,
  /** A local file or stream could not be read or written. */
  LOCAL_IO: 5,
} as const;
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

/** A failure the CLI itself detected, with the exit code it means. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    readonly exitCode: ExitCodeValue,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export class UsageError extends CliError {
  override name = 'UsageError';
  constructor(message: string) {
    super(ExitCode.USAGE, message);
  }
}

export class NotFoundError extends CliError {
  override name = 'NotFoundError';
  constructor(message: string) {
    super(ExitCode.NOT_FOUND, message);
  }
}

export class UnreachableError extends CliError {
  override name = 'UnreachableError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(ExitCode.UNREACHABLE, message, options);
  }
}

export class LocalIoError extends CliError {
  override name = 'LocalIoError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(ExitCode.LOCAL_IO, message, options);
  }
}

/** `--help` (of the tool or of a command): print `text` on stdout and exit 0. */
export class HelpShown extends Error {
  override name = 'HelpShown';
  constructor(readonly text: string) {
    super('help');
  }
}

const UNREACHABLE_CODES: ReadonlySet<number> = new Set([ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS]);

/** The exit code of a failure. */
export function exitCodeOf(e: unknown): ExitCodeValue {
  if (e instanceof CliError) return e.exitCode;
  // the master answered, and refused our cluster secret: not an unreachable master
  if (e instanceof MasterAuthError || (e instanceof StoreError && e.code === ErrorCode.UNAUTHENTICATED)) return ExitCode.STORE_ERROR;
  if (e instanceof MasterChannelError) return ExitCode.UNREACHABLE;
  if (e instanceof StoreError) {
    if (e.code === ErrorCode.OBJECT_NOT_FOUND || e.code === ErrorCode.TASK_NOT_FOUND) return ExitCode.NOT_FOUND;
    if (e.code === ErrorCode.INVALID_KEY) return ExitCode.USAGE;
    if (UNREACHABLE_CODES.has(e.code) || e.cause instanceof MasterChannelError) return ExitCode.UNREACHABLE;
    return ExitCode.STORE_ERROR;
  }
  return ExitCode.STORE_ERROR;
}

/** The failure as one line (no stack): `store <command>: <message>`. */
export function errorLine(command: string, e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  const oneLine = msg.replace(/\s*\n\s*/g, '; ').trim();
  return `store${command ? ' ' + command : ''}: ${oneLine}`;
}
