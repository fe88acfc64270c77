import { ErrorCode, errorCodeName, isOk } from './error-code.js';

describe('error codes', () => {
  it('names every code and treats only OK as success', () => {
    expect(errorCodeName(ErrorCode.NO_AVAILABLE_HANDLE)).toBe('NO_AVAILABLE_HANDLE');
    expect(errorCodeName(-9999)).toBe('UNKNOWN_ERROR(-9999)');
    expect(isOk(ErrorCode.OK)).toBe(true);
    for (const [name, code] of Object.entries(ErrorCode)) {
      if (name !== 'OK') expect(code).toBeLessThan(0);
    }
  });
});
