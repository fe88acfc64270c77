import { ErrorCode } from '../common/error-code.js';
import { TransferErrorCode } from '../native/errors.js';
import { InvalidParamsError, NoSpaceError, ObjectNotFoundError, StoreError, TransferError, transferErrorCode } from './errors.js';

describe('client errors', () => {
  it('maps every native transfer failure to an ErrorCode', () => {
    for (const code of Object.values(TransferErrorCode)) {
      const expected = code === 'ADDRESS_OUT_OF_RANGE' ? ErrorCode.ADDRESS_OUT_OF_RANGE : code === 'UNAUTHENTICATED' ? ErrorCode.UNAUTHENTICATED : ErrorCode.TRANSFER_FAILED;
      expect(transferErrorCode(Object.assign(new Error('x'), { code }))).toBe(expected);
    }
    expect(transferErrorCode(new Error('no code'))).toBe(ErrorCode.TRANSFER_FAILED);
    expect(transferErrorCode({ code: 'toString' })).toBe(ErrorCode.TRANSFER_FAILED); // not a table key
  });

  it('gives each status code its subclass and name', () => {
    const e = StoreError.fromCode(ErrorCode.OBJECT_NOT_FOUND, 'get "k"');
    expect(e).toBeInstanceOf(ObjectNotFoundError);
    expect(e.message).toBe('get "k": OBJECT_NOT_FOUND');
    expect(StoreError.fromCode(ErrorCode.INVALID_KEY, 'put')).toMatchObject({ code: ErrorCode.INVALID_KEY, codeName: 'INVALID_KEY' });
    expect(StoreError.fromCode(ErrorCode.INVALID_KEY, 'put')).toBeInstanceOf(InvalidParamsError);
    expect(StoreError.fromCode(ErrorCode.CHECKSUM_MISMATCH, 'get')).toBeInstanceOf(TransferError);
  });

  it("a batch item's error (forItem) is fromCode's, with no stack frames, and leaves later errors their stacks", () => {
    const e = StoreError.forItem(ErrorCode.NO_AVAILABLE_HANDLE, 'put "k": start refused');
    expect(e).toBeInstanceOf(NoSpaceError);
    expect(e).toMatchObject({ code: ErrorCode.NO_AVAILABLE_HANDLE, message: 'put "k": start refused: NO_AVAILABLE_HANDLE' });
    expect(e.stack).toBe(`NoSpaceError: ${e.message}`);
    expect(StoreError.fromCode(ErrorCode.NO_AVAILABLE_HANDLE, 'put').stack).toMatch(/\n\s+at /);
  });
});
