// One reconcile pass of a StoreSegment: like the cluster's, plus the dependency on its
// StoreCluster (an expected wait while it does not exist) and mounted-segment figures filtered
// to this segment's own pods.
import { scrapeTls } from './cluster-secret.js';
import type { V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import type { StoreCluster, StoreSegment } from '../gen/index.js';
import { defaultStoreCluster, defaultStoreSegment } from '../api/defaults.js';
import { validateStoreCluster, validateStoreSegment } from '../api/validation.js';
import { renderSegment } from '../render/render.js';
import { segmentName } from '../render/names.js';
import { segmentSelector } from '../render/segment-statefulset.js';
import { applyObject } from './apply.js';
import { REQUEUE_PROGRESSING_MS, REQUEUE_STEADY_MS, TerminalError, type ReconcileContext, type Result } from './context.js';
import { deepEqual } from '../webhook/json-patch.js';
import { sumSegments, type SegmentTotals } from './segments-detail.js';
import { invalidSpecStatus, segmentStatus } from './status.js';

export async function reconcileSegment(ctx: ReconcileContext, namespace: string, name: string): Promise<Result> {
  const ref = { kind: 'StoreSegment', namespace, name };
  const ss = await ctx.api.get<StoreSegment>(ref);
  if (!ss || ss.metadata?.deletionTimestamp) return {};
  const d = defaultStoreSegment(ss, ctx.defaults);
  const generation = ss.metadata?.generation ?? 0;
  const patchStatus = async (status: StoreSegment['status']) => {
    if (!deepEqual(status, ss.status)) await ctx.api.mergePatch(ref, { status }, 'status');
  };

  const errors = validateStoreSegment(d);
  if (errors.length) {
    const message = errors.join('; ');
    await patchStatus(invalidSpecStatus(ss.status, message, generation, ctx.wallNow()));
    ctx.events.warning(ss, 'InvalidSpec', message);
    throw new TerminalError(`StoreSegment ${namespace}/${name}: ${message}`);
  }

  const sc = await ctx.api.get<StoreCluster>({ kind: 'StoreCluster', namespace, name: d.spec.cluster });
  const dc = sc && defaultStoreCluster(sc, ctx.defaults);
  if (!dc || validateStoreCluster(dc).length) {
    const why = dc ? `StoreCluster ${d.spec.cluster} has an invalid spec` : `StoreCluster ${d.spec.cluster} not found in namespace ${namespace}`;
    await patchStatus(segmentStatus(ss.status, { generation, replicas: d.spec.replicas, clusterMissing: why }, ctx.wallNow()));
    if (ss.status?.conditions?.find((c) => c.type === 'Ready')?.reason !== 'ClusterNotFound') ctx.events.warning(ss, 'ClusterNotFound', why);
    return { requeueAfterMs: REQUEUE_STEADY_MS };
  }

  for (const obj of renderSegment(d, dc).desired) await applyObject(ctx.api, obj, ss, ctx.events);

  const sts = await ctx.api.get<V1StatefulSet>({ kind: 'StatefulSet', namespace, name: segmentName(name) });
  let totals: SegmentTotals | undefined;
  let totalsError: string | undefined;
  if (ctx.fetchSegments && (sts?.status?.readyReplicas ?? 0) > 0) {
    const sel = Object.entries(segmentSelector(name))
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const pods = (await ctx.api.list<V1Pod>({ kind: 'Pod', namespace }, sel)).items;
    const hosts = new Set(pods.flatMap((p) => [p.status?.podIP, p.metadata?.name].filter((x): x is string => !!x)));
    try {
      totals = sumSegments(await ctx.fetchSegments(ctx.masterHttpUrl(dc), await scrapeTls(ctx.api, dc)), hosts);
    } catch (e) {
      totalsError = (e as Error).message;
    }
  }
  const status = segmentStatus(ss.status, { generation, replicas: d.spec.replicas, statefulSet: sts, totals, totalsError }, ctx.wallNow());
  await patchStatus(status);
  return { requeueAfterMs: status.phase === 'Ready' ? REQUEUE_STEADY_MS : REQUEUE_PROGRESSING_MS };
}
