// What a reconcile pass works with (API, events, clock, optional master query) and its result.
import type { OperatorDefaults, DefaultedStoreCluster } from '../api/defaults.js';
import type { EventRecorder } from './events.js';
import type { KubeApi } from './kube-client.js';
import type { SegmentsFetcher } from './segments-detail.js';
import type { Clock } from '../../common/clock.js';
import type { HitRateWindow } from './hit-rate.js';
import type { MasterFiguresFetcher } from './master-figures.js';

export interface ReconcileContext {
  api: KubeApi;
  events: EventRecorder;
  defaults: OperatorDefaults;
  /** Reads the master's segment detail; undefined skips segment figures. */
  fetchSegments?: SegmentsFetcher;
  /** Reads the master's objects and lookup counters; undefined skips objects and hit rate. */
  fetchFigures?: MasterFiguresFetcher;
  /** Each cluster's hit-rate window (namespace/name), kept across passes; with fetchFigures. */
  hitRates?: Map<string, HitRateWindow>;
  /** Time of the hit-rate window's scrapes (default the real clock). */
  clock?: Clock;
  /** Base URL of a cluster's leader HTTP endpoints (the metrics Service unless overridden). */
  masterHttpUrl: (sc: DefaultedStoreCluster) => string;
  wallNow: () => string;
  log: (message: string) => void;
}

export interface Result {
  /** Reconcile again after this long: an expected wait (rollout, refresh of figures). */
  requeueAfterMs?: number;
}

/** An error retrying cannot fix (an invalid spec): logged and reported, not retried. */
export class TerminalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TerminalError';
  }
}

export const REQUEUE_PROGRESSING_MS = 5_000;
export const REQUEUE_STEADY_MS = 30_000;
