// Test support: how much of a mapping of this process is resident, from /proc/self/smaps.
import { readFileSync } from 'node:fs';

/** Resident kB of the mapping starting at `address`. */
export function residentKb(address: number): number {
  const smaps = readFileSync('/proc/self/smaps', 'utf8');
  const block = smaps.split(/\n(?=[0-9a-f]+-)/).find((b) => b.startsWith(address.toString(16) + '-'));
  if (!block) throw new Error(`no mapping at 0x${address.toString(16)}`);
  return Number(/\nRss:\s+(\d+) kB/.exec(block)![1]);
}
