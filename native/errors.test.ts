// TransferError/MemoryError.from keep the addon's code and message, also for errors made in
// another realm (jest runs tests in a vm context, so the addon's errors fail `instanceof Error`).
import { runInNewContext } from 'node:vm';
import { MemoryError, TransferError } from './errors.js';

const foreign = (message: string, code: string): unknown => runInNewContext('Object.assign(new Error(message), { code })', { message, code });

test('an error from another realm keeps its code and its message (no "Error: " prefix)', () => {
  const e = foreign('transfer with 127.0.0.1:1 failed', 'TIMEOUT');
  expect(e instanceof Error).toBe(false); // the premise: a different realm's Error
  const t = TransferError.from(e);
  expect(t.code).toBe('TIMEOUT');
  expect(t.message).toBe('transfer with 127.0.0.1:1 failed');
  expect(t.cause).toBe(e);
  const m = MemoryError.from(foreign('mmap: no memory', 'MAP_FAILED'));
  expect(m.code).toBe('MAP_FAILED');
  expect(m.message).toBe('mmap: no memory');
});

test('a thrown non-error becomes TRANSFER_FAILED with its text', () => {
  const t = TransferError.from('boom');
  expect(t.code).toBe('TRANSFER_FAILED');
  expect(t.message).toBe('boom');
});

test('the endpoints of the peers that failed survive the realm crossing; none means an empty list', () => {
  const e = runInNewContext('Object.assign(new Error("peer gone"), { code: "TIMEOUT", endpoints: ["127.0.0.1:1", 7] })');
  expect(TransferError.from(e).endpoints).toEqual(['127.0.0.1:1']);
  expect(TransferError.from(foreign('bad', 'INVALID_ARGUMENT')).endpoints).toEqual([]);
  expect(new TransferError('TIMEOUT', 'x', { endpoints: ['a:1'] }).endpoints).toEqual(['a:1']);
});
