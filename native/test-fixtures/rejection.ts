// The TransferError a transfer promise rejects with (tests: the promise must reject, with that type).
import { TransferError } from '../index.js';

export async function rejection(p: Promise<unknown>): Promise<TransferError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TransferError);
  return err as TransferError;
}
