// A KEY argument checked against the key alphabet (common/key-rules.ts) before anything is
// contacted: a key the store would refuse is a usage error (exit 2) naming the problem.
import { keyProblem } from '../common/key-rules.js';
import { UsageError } from './cli-errors.js';

export function keyArg(key: string): string {
  const problem = keyProblem(key);
  if (problem) throw new UsageError(`KEY ${JSON.stringify(key)}: ${problem}`);
  return key;
}
