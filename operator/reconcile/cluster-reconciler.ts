// One reconcile pass of a StoreCluster: fetch it, default and validate, render, create-or-patch
// what it should own, delete what it should not, then observe (StatefulSet, leader pod, the
// master's segments) and patch status if it changed. Level-triggered: it uses only the key.
import type { V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import type { StoreCluster } from '../gen/index.js';
import { Labels } from '../api/constants.js';
import { defaultStoreCluster } from '../api/defaults.js';
import { validateStoreCluster } from '../api/validation.js';
import { masterSelector } from '../render/master-statefulset.js';
import { masterAddress, masterName } from '../render/names.js';
import { renderCluster } from '../render/render.js';
import { applyObject, removeObject } from './apply.js';
import { REQUEUE_PROGRESSING_MS, REQUEUE_STEADY_MS, TerminalError, type ReconcileContext, type Result } from './context.js';
import { deepEqual } from '../webhook/json-patch.js';
import { sumSegments, type SegmentTotals } from './segments-detail.js';
import { clusterStatus, invalidSpecStatus } from './status.js';
import { formatHitRate, HitRateWindow } from './hit-rate.js';
import { realClock } from '../../common/clock.js';
import { ensureClusterSecret, scrapeTls } from './cluster-secret.js';
import type { TlsMaterial } from '../../common/tls-material.js';

const selector = (m: Record<string, string>) =>
  Object.entries(m)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');

export async function reconcileCluster(ctx: ReconcileContext, namespace: string, name: string): Promise<Result> {
  const sc = await ctx.api.get<StoreCluster>({ kind: 'StoreCluster', namespace, name });
  if (!sc || sc.metadata?.deletionTimestamp) return {}; // owned objects go with it (ownerReferences)
  const d = defaultStoreCluster(sc, ctx.defaults);
  const generation = sc.metadata?.generation ?? 0;

  const errors = validateStoreCluster(d);
  if (errors.length) {
    const message = errors.join('; ');
    const status = invalidSpecStatus(sc.status, message, generation, ctx.wallNow());
    if (!deepEqual(status, sc.status)) {
      await ctx.api.mergePatch({ kind: 'StoreCluster', namespace, name }, { status }, 'status');
      ctx.events.warning(sc, 'InvalidSpec', message);
    }
    throw new TerminalError(`StoreCluster ${namespace}/${name}: ${message}`);
  }

  const secretProblem = await ensureClusterSecret(ctx.api, d, ctx.events);
  if (secretProblem) ctx.events.warning(sc, 'ClusterSecretInvalid', `${secretProblem}: members will refuse to start; delete the Secret to have a new one made`);
  const rendered = renderCluster(d);
  for (const obj of rendered.desired) await applyObject(ctx.api, obj, sc, ctx.events);
  for (const ref of rendered.absent) await removeObject(ctx.api, ref, sc, ctx.events);

  const sts = await ctx.api.get<V1StatefulSet>({ kind: 'StatefulSet', namespace, name: masterName(name) });
  const pods = (await ctx.api.list<V1Pod>({ kind: 'Pod', namespace }, selector(masterSelector(name)))).items;
  const isReady = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  const leaderPod = d.spec.master.replicas > 1 ? pods.find((p) => p.metadata?.labels?.[Labels.leader] === 'true') : pods.find(isReady);

  let totals: SegmentTotals | undefined;
  let totalsError: string | undefined;
  let tls: TlsMaterial | undefined;
  let scrape = leaderPod !== undefined;
  if (scrape && (ctx.fetchSegments || ctx.fetchFigures)) {
    try {
      tls = await scrapeTls(ctx.api, d);
    } catch (e) {
      totalsError = (e as Error).message;
      scrape = false;
    }
  }
  if (ctx.fetchSegments && scrape) {
    try {
      totals = sumSegments(await ctx.fetchSegments(ctx.masterHttpUrl(d), tls));
    } catch (e) {
      totalsError = (e as Error).message;
    }
  }
  let figures: { objects: number; hitRate?: string } | undefined;
  if (ctx.fetchFigures && scrape) {
    try {
      const f = await ctx.fetchFigures(ctx.masterHttpUrl(d), tls);
      const key = `${namespace}/${name}`;
      const hits = ctx.hitRates?.get(key) ?? new HitRateWindow();
      ctx.hitRates?.set(key, hits);
      hits.record((ctx.clock ?? realClock).now(), f);
      figures = { objects: f.objects, hitRate: formatHitRate(hits.rate()) };
    } catch (e) {
      totalsError ??= (e as Error).message;
    }
  }
  const status = clusterStatus(
    sc.status,
    {
      generation,
      figures,
      replicas: d.spec.master.replicas,
      statefulSet: sts,
      leader: leaderPod?.metadata?.name,
      masterAddress: masterAddress(d),
      totals,
      totalsError,
    },
    ctx.wallNow(),
  );
  if (!deepEqual(status, sc.status)) {
    if (sc.status?.leader !== status.leader && status.leader) ctx.events.normal(sc, 'LeaderElected', `master ${status.leader} serves`);
    await ctx.api.mergePatch({ kind: 'StoreCluster', namespace, name }, { status: { ...status, leader: status.leader ?? null } }, 'status');
  }
  return { requeueAfterMs: status.phase === 'Ready' ? REQUEUE_STEADY_MS : REQUEUE_PROGRESSING_MS };
}
