// Every failure maps to one exit code and one line.
import { ErrorCode } from '../common/error-code.js';
import { InvalidParamsError, NoSpaceError, ObjectExistsError, ObjectNotFoundError, StoreError, UnavailableError } from '../client/errors.js';
import { MasterConnectionError } from '../client/master-channel-errors.js';
import { errorLine, ExitCode, exitCodeOf, LocalIoError, NotFoundError, UnreachableError, UsageError } from './cli-errors.js';

describe('exitCodeOf', () => {
  it('maps CLI, client and channel errors to the documented codes', () => {
    expect(exitCodeOf(new UsageError('x'))).toBe(2);
    expect(exitCodeOf(new NotFoundError('x'))).toBe(1);
    expect(exitCodeOf(new UnreachableError('x'))).toBe(3);
    expect(exitCodeOf(new LocalIoError('x'))).toBe(5);
    expect(exitCodeOf(new ObjectNotFoundError('x'))).toBe(ExitCode.NOT_FOUND);
    expect(exitCodeOf(new InvalidParamsError('x', { code: ErrorCode.INVALID_KEY }))).toBe(ExitCode.USAGE);
    expect(exitCodeOf(new UnavailableError('x'))).toBe(ExitCode.UNREACHABLE);
    expect(exitCodeOf(new MasterConnectionError('x', 'h:1'))).toBe(ExitCode.UNREACHABLE);
    expect(exitCodeOf(new StoreError(ErrorCode.INTERNAL_ERROR, 'x', { cause: new MasterConnectionError('x', 'h:1') }))).toBe(ExitCode.UNREACHABLE);
    expect(exitCodeOf(new ObjectExistsError('x'))).toBe(ExitCode.STORE_ERROR);
    expect(exitCodeOf(new NoSpaceError('x'))).toBe(ExitCode.STORE_ERROR);
    expect(exitCodeOf(new Error('x'))).toBe(ExitCode.STORE_ERROR);
  });

  it('prints one line with no stack', () => {
    expect(errorLine('get', new Error('first\n  second'))).toBe('store get: first; second');
    expect(errorLine('', 'odd')).toBe('store: odd');
  });
});
