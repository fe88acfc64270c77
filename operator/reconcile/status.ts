// Pure status computation: from what the reconciler observed (StatefulSet status, leader pod,
// the master's segment totals) to the CR's status block with its conditions and phase.
import type { V1StatefulSet } from '@kubernetes/client-node';
import type { StoreClusterStatus, StoreSegmentStatus } from '../gen/index.js';
import { humanBytes } from '../api/quantity.js';
import { setConditions, type ConditionInput } from './conditions.js';
import type { SegmentTotals } from './segments-detail.js';

export interface ClusterObservation {
  generation: number;
  replicas: number;
  statefulSet?: V1StatefulSet;
  leader?: string;
  masterAddress: string;
  totals?: SegmentTotals;
  totalsError?: string;
  /** From the master's /metrics: objects held, and the hit rate of the last minute ("97.5%" or "-"). */
  figures?: { objects: number; hitRate?: string };
}

function rollout(sts: V1StatefulSet | undefined, replicas: number) {
  const st = sts?.status;
  const ready = st?.readyReplicas ?? 0;
  const updated = st?.updatedReplicas ?? 0;
  const current = (sts?.metadata?.generation ?? 0) <= (st?.observedGeneration ?? -1);
  return { ready, done: !!sts && current && ready >= replicas && updated >= replicas };
}

export function clusterStatus(prev: StoreClusterStatus | undefined, o: ClusterObservation, nowIso: string): StoreClusterStatus {
  const { ready, done } = rollout(o.statefulSet, o.replicas);
  const serving = ready >= 1 && (o.replicas === 1 || !!o.leader);
  const g = o.generation;
  const conds: ConditionInput[] = [
    serving
      ? {
          type: 'Ready',
          status: 'True',
          reason: 'LeaderServing',
          message: o.replicas === 1 ? 'the master is serving' : `master ${o.leader} leads and serves`,
          observedGeneration: g,
        }
      : {
          type: 'Ready',
          status: 'False',
          reason: ready ? 'NoLeader' : 'MastersNotReady',
          message: ready ? 'no master holds the leader label yet' : 'no master pod is ready yet',
          observedGeneration: g,
        },
    done
      ? { type: 'Progressing', status: 'False', reason: 'RolloutComplete', message: `${ready}/${o.replicas} masters ready`, observedGeneration: g }
      : { type: 'Progressing', status: 'True', reason: 'RollingOut', message: `${ready}/${o.replicas} masters ready`, observedGeneration: g },
  ];
  if (o.totalsError)
    conds.push({ type: 'Degraded', status: 'True', reason: 'SegmentsUnavailable', message: `cannot read segments from the master: ${o.totalsError}`, observedGeneration: g });
  else if (done && !serving) conds.push({ type: 'Degraded', status: 'True', reason: 'NoLeader', message: 'all masters are ready but none leads', observedGeneration: g });
  else if (!done && serving && ready < o.replicas && prev?.phase === 'Ready')
    conds.push({ type: 'Degraded', status: 'True', reason: 'MastersMissing', message: `${ready}/${o.replicas} masters ready`, observedGeneration: g });
  else conds.push({ type: 'Degraded', status: 'False', reason: 'AsExpected', message: 'no fault observed', observedGeneration: g });
  const conditions = setConditions(prev?.conditions, conds, nowIso);
  const degraded = conds.some((c) => c.type === 'Degraded' && c.status === 'True');
  const totals =
    o.totals ?? (prev ? { segments: prev.segments ?? 0, capacityBytes: prev.capacityBytes ?? 0, usedBytes: prev.usedBytes ?? 0 } : { segments: 0, capacityBytes: 0, usedBytes: 0 });
  return {
    phase: degraded ? 'Degraded' : serving && done ? 'Ready' : ready ? 'Progressing' : 'Pending',
    ...(o.leader ? { leader: o.leader } : {}),
    masterAddress: o.masterAddress,
    readyMasters: ready,
    segments: totals.segments,
    capacityBytes: totals.capacityBytes,
    usedBytes: totals.usedBytes,
    capacity: humanBytes(totals.capacityBytes),
    ...(o.figures ? { objects: o.figures.objects, hitRate: o.figures.hitRate } : prev?.objects !== undefined ? { objects: prev.objects, hitRate: prev.hitRate } : {}),
    observedGeneration: g,
    conditions,
  };
}

export interface SegmentObservation {
  generation: number;
  replicas: number;
  statefulSet?: V1StatefulSet;
  clusterMissing?: string;
  totals?: SegmentTotals;
  totalsError?: string;
}

export function segmentStatus(prev: StoreSegmentStatus | undefined, o: SegmentObservation, nowIso: string): StoreSegmentStatus {
  const g = o.generation;
  const { ready, done } = rollout(o.statefulSet, o.replicas);
  const conds: ConditionInput[] = [];
  if (o.clusterMissing) {
    conds.push(
      { type: 'Ready', status: 'False', reason: 'ClusterNotFound', message: o.clusterMissing, observedGeneration: g },
      { type: 'Progressing', status: 'False', reason: 'WaitingForCluster', message: o.clusterMissing, observedGeneration: g },
      { type: 'Degraded', status: 'True', reason: 'ClusterNotFound', message: o.clusterMissing, observedGeneration: g },
    );
  } else {
    const mounted = o.totals?.segments;
    const allMounted = mounted === undefined || mounted >= o.replicas;
    conds.push(
      done && allMounted
        ? {
            type: 'Ready',
            status: 'True',
            reason: 'SegmentsMounted',
            message: `${ready}/${o.replicas} store pods ready${mounted !== undefined ? `, ${mounted} segments mounted` : ''}`,
            observedGeneration: g,
          }
        : {
            type: 'Ready',
            status: 'False',
            reason: done ? 'SegmentsNotMounted' : 'PodsNotReady',
            message: `${ready}/${o.replicas} store pods ready${mounted !== undefined ? `, ${mounted} segments mounted` : ''}`,
            observedGeneration: g,
          },
      done
        ? { type: 'Progressing', status: 'False', reason: 'RolloutComplete', message: `${ready}/${o.replicas} store pods ready`, observedGeneration: g }
        : { type: 'Progressing', status: 'True', reason: 'RollingOut', message: `${ready}/${o.replicas} store pods ready`, observedGeneration: g },
      o.totalsError
        ? { type: 'Degraded', status: 'True', reason: 'SegmentsUnavailable', message: `cannot read segments from the master: ${o.totalsError}`, observedGeneration: g }
        : { type: 'Degraded', status: 'False', reason: 'AsExpected', message: 'no fault observed', observedGeneration: g },
    );
  }
  const conditions = setConditions(prev?.conditions, conds, nowIso);
  const t = o.totals ?? { segments: prev?.mountedSegments ?? 0, capacityBytes: prev?.mountedBytes ?? 0, usedBytes: prev?.usedBytes ?? 0, draining: prev?.drainingSegments ?? 0 };
  const isTrue = (type: string) => conds.some((c) => c.type === type && c.status === 'True');
  return {
    phase: o.clusterMissing ? 'Pending' : isTrue('Degraded') ? 'Degraded' : isTrue('Ready') ? 'Ready' : ready ? 'Progressing' : 'Pending',
    replicas: o.statefulSet?.status?.replicas ?? 0,
    readyReplicas: ready,
    mountedSegments: t.segments,
    drainingSegments: t.draining,
    mountedBytes: t.capacityBytes,
    usedBytes: t.usedBytes,
    capacity: humanBytes(t.capacityBytes),
    observedGeneration: g,
    conditions,
  };
}

/** The status of an object whose spec is invalid: phase Failed, and the three conditions saying why. */
export function invalidSpecStatus<S extends { conditions?: StoreClusterStatus['conditions'] }>(prev: S | undefined, message: string, generation: number, nowIso: string) {
  const conditions = setConditions(
    prev?.conditions,
    [
      { type: 'Ready', status: 'False', reason: 'InvalidSpec', message, observedGeneration: generation },
      { type: 'Progressing', status: 'False', reason: 'InvalidSpec', message, observedGeneration: generation },
      { type: 'Degraded', status: 'True', reason: 'InvalidSpec', message, observedGeneration: generation },
    ],
    nowIso,
  );
  return { ...prev, phase: 'Failed' as const, observedGeneration: generation, conditions };
}
