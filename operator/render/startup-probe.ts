// The startupProbe of a pod that holds a segment: its budget grows with the segment, because the
// store service pre-faults every page before it answers /health. Budget: 30 s for the process
// plus 2 s per GiB, four times what pre-faulting took here (`npm run bench:prefault`: 0.24 s per
// GiB on two threads, 0.52 s per GiB on the old single-threaded fill), so a slow node still starts
// and a wedged one is restarted. Liveness and readiness probes only begin after it succeeds.
import type { V1Probe } from '@kubernetes/client-node';

const GiB = 2 ** 30;
const BASE_SECONDS = 30;
const SECONDS_PER_GIB = 2;
const PERIOD_SECONDS = 2;

/** The startup budget in seconds for a segment of `segmentBytes`. */
export function startupBudgetSeconds(segmentBytes: number): number {
  return BASE_SECONDS + Math.ceil((Math.max(0, segmentBytes) / GiB) * SECONDS_PER_GIB);
}

/** A startupProbe on GET `path` at `port` that allows the segment's startup budget. */
export function segmentStartupProbe(segmentBytes: number, path: string, port: string): V1Probe {
  return {
    httpGet: { path, port },
    periodSeconds: PERIOD_SECONDS,
    failureThreshold: Math.ceil(startupBudgetSeconds(segmentBytes) / PERIOD_SECONDS),
  };
}
