// CPU time of processes, all their threads included, at nanosecond resolution: the sum of
// /proc/<pid>/task/*/schedstat's first field (time on a CPU). /proc/<pid>/stat's utime and stime
// count in 10 ms ticks, too coarse for a bench row of a few hundred milliseconds. A thread that
// ended between two samples takes its time with it (the benches' processes keep theirs).
import { readdirSync, readFileSync } from 'node:fs';

/** Nanoseconds on a CPU so far of `pid`'s live threads (0 when it is gone; Linux only). */
export function cpuNs(pid: number): number {
  let ns = 0;
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  for (const t of tasks) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns;
}

/** Minor page faults so far of `pid` (all its threads, ended ones included; 0 when it is gone). */
export function minorFaults(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[7]);
  } catch {
    return 0;
  }
}

/** Samples of several named processes; `since(earlier, n)` is the CPU us per op of each between two samples. */
export class ProcessCpu {
  constructor(private readonly pids: ReadonlyMap<string, number>) {}

  sample(): Map<string, number> {
    return new Map([...this.pids].map(([name, pid]) => [name, cpuNs(pid)]));
  }

  /** CPU microseconds per op of each process since `earlier`, over `ops` ops. */
  since(earlier: Map<string, number>, ops: number, now = this.sample()): Map<string, number> {
    return new Map([...now].map(([name, ns]) => [name, (ns - (earlier.get(name) ?? 0)) / 1000 / ops]));
  }
}

/** "master 3.1, A 7.6, ..." */
export function formatCpu(perOp: Map<string, number>): string {
  return [...perOp].map(([name, us]) => `${name} ${us.toFixed(1)}`).join(', ');
}

/**
 * Resolves once `pid` used less than `quietMs` of CPU in a `windowMs` window (or after `maxMs`):
 * for a process that finishes background work after a call returned (a grant's page-table
 * populator, docs/native.md), before a measured row starts. Returns how long it waited (ms).
 */
export async function untilIdle(pid: number, quietMs = 5, windowMs = 200, maxMs = 15_000): Promise<number> {
  const start = Date.now();
  let before = cpuNs(pid);
  while (Date.now() - start < maxMs) {
    await new Promise((r) => setTimeout(r, windowMs));
    const now = cpuNs(pid);
    // a thread that ended takes its time with it: a drop counts as quiet too
    if (now - before < quietMs * 1e6) break;
    before = now;
  }
  return Date.now() - start;
}
