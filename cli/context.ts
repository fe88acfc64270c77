// What a `store` command runs with: the parsed invocation, the environment and the three standard
// streams (parameters, so tests and other programs can run a command in process).
import type { Readable, Writable } from 'node:stream';
import type { Invocation } from './args.js';

export type OutStream = Writable & { isTTY?: boolean; columns?: number };

export interface CliContext {
  inv: Invocation;
  env: Record<string, string | undefined>;
  stdin: Readable & { isTTY?: boolean };
  stdout: OutStream;
  stderr: OutStream;
}

/** Writes `text` to `out`, resolving once it is handed to the stream (waiting for 'drain' if needed). */
export function write(out: Writable, text: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error): void => reject(e);
    out.once('error', onError);
    const flushed = out.write(text, (e) => {
      if (e) return; // reported through 'error'
    });
    const finish = (): void => {
      out.removeListener('error', onError);
      resolve();
    };
    if (flushed) finish();
    else out.once('drain', finish);
  });
}
