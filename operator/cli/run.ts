// `store-operator run`: wires informers, the work queue, the reconcilers, leader election (only
// the leader reconciles; every replica serves the webhook) and the webhook's TLS, plus an HTTP
// health endpoint. All the logic lives in the pure parts; this file is the shell.
import * as http from 'node:http';
import { readFileSync, existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { StoreCluster } from '../gen/index.js';
import { Labels, MANAGER } from '../api/constants.js';
import { defaultStoreCluster, type DefaultedStoreCluster, type OperatorDefaults } from '../api/defaults.js';
import { K8sLease } from '../../common/k8s-lease.js';
import { loadKubeConfig } from './kube-config.js';
import { LeaderElector } from '../election/leader-elector.js';
import { reconcileCluster } from '../reconcile/cluster-reconciler.js';
import { Controller } from '../reconcile/controller.js';
import { ApiEventRecorder } from '../reconcile/events.js';
import { Informer } from '../reconcile/informer.js';
import { KubeClient } from '../reconcile/kube-client.js';
import { reconcileSegment } from '../reconcile/segment-reconciler.js';
import { httpSegmentsFetcher } from '../reconcile/segments-detail.js';
import { httpMasterFiguresFetcher } from '../reconcile/master-figures.js';
import type { HitRateWindow } from '../reconcile/hit-rate.js';
import { masterHttpUrl } from '../render/names.js';
import type { ClusterLookup } from '../webhook/admission.js';
import { WebhookServer } from '../webhook/server.js';
import { WebhookTls } from '../webhook/webhook-tls.js';

export interface RunOptions {
  defaults: OperatorDefaults;
  /** Namespace to watch; undefined: all namespaces. */
  watchNamespace?: string;
  leaderElect: boolean;
  leaseName: string;
  leaseNamespace: string;
  identity: string;
  healthPort: number;
  webhookPort: number | undefined;
  certDir?: string;
  webhookService: string;
  webhookSecret: string;
  webhookConfig: string;
  /** `{name}` / `{namespace}` template for the leader's HTTP base URL; default the metrics Service. */
  masterUrlTemplate?: string;
  segmentStats: boolean;
  resyncMs: number;
}

const log = (m: string) => process.stderr.write(`${new Date().toISOString()} store-operator: ${m}\n`);

export async function run(o: RunOptions): Promise<void> {
  const kc = loadKubeConfig();
  const ownNamespace = process.env.POD_NAMESPACE;
  if (o.webhookPort !== undefined && ownNamespace === 'default') {
    log(
      'WARNING: the webhook never injects pods in its own namespace, and that is "default": annotated pods there start without the store sidecar; install the operator in a namespace of its own',
    );
  }
  const api = new KubeClient(kc);
  const events = new ApiEventRecorder(api, MANAGER, () => new Date().toISOString(), log);
  const ctx = {
    api,
    events,
    defaults: o.defaults,
    fetchSegments: o.segmentStats ? httpSegmentsFetcher : undefined,
    fetchFigures: o.segmentStats ? httpMasterFiguresFetcher : undefined,
    hitRates: new Map<string, HitRateWindow>(),
    masterHttpUrl: (sc: DefaultedStoreCluster) =>
      o.masterUrlTemplate ? o.masterUrlTemplate.replaceAll('{name}', sc.metadata.name).replaceAll('{namespace}', sc.metadata.namespace) : masterHttpUrl(sc),
    wallNow: () => new Date().toISOString(),
    log,
  };
  const controller = new Controller({ StoreCluster: (ns, n) => reconcileCluster(ctx, ns, n), StoreSegment: (ns, n) => reconcileSegment(ctx, ns, n) }, log);
  let leading = !o.leaderElect;
  let stopping = false;

  const enqueueOwner = (obj: KubernetesObject) => {
    if (!leading) return;
    const ns = obj.metadata?.namespace ?? '';
    for (const ref of obj.metadata?.ownerReferences ?? []) {
      if (ref.kind === 'StoreCluster' || ref.kind === 'StoreSegment') controller.enqueue(ref.kind, ns, ref.name);
    }
    const labels = obj.metadata?.labels ?? {};
    if (obj.kind === 'Pod' || !obj.metadata?.ownerReferences?.length) {
      if (labels[Labels.segment]) controller.enqueue('StoreSegment', ns, labels[Labels.segment]);
      else if (labels[Labels.cluster]) controller.enqueue('StoreCluster', ns, labels[Labels.cluster]);
    }
  };
  const own = (kind: string) => (obj: KubernetesObject) => leading && controller.enqueue(kind, obj.metadata?.namespace ?? '', obj.metadata?.name ?? '');
  const segments = new Informer(kc, api, { kind: 'StoreSegment', namespace: o.watchNamespace, resyncMs: o.resyncMs, onChange: own('StoreSegment'), log });
  // A cluster's change also wakes the segments that use it (they render its addresses).
  const clusterChanged = (obj: KubernetesObject) => {
    own('StoreCluster')(obj);
    for (const s of segments.list() as { spec?: { cluster?: string }; metadata?: KubernetesObject['metadata'] }[]) {
      if (s.spec?.cluster === obj.metadata?.name && s.metadata?.namespace === obj.metadata?.namespace) own('StoreSegment')(s);
    }
  };
  const clusters = new Informer(kc, api, { kind: 'StoreCluster', namespace: o.watchNamespace, resyncMs: o.resyncMs, onChange: clusterChanged, log });
  const informers = [
    clusters,
    segments,
    new Informer(kc, api, { kind: 'StatefulSet', namespace: o.watchNamespace, labelSelector: `${Labels.managedBy}=${MANAGER}`, resyncMs: o.resyncMs, onChange: enqueueOwner, log }),
    new Informer(kc, api, { kind: 'Pod', namespace: o.watchNamespace, labelSelector: `${Labels.managedBy}=${MANAGER}`, resyncMs: o.resyncMs, onChange: enqueueOwner, log }),
  ];
  for (const i of informers) i.start();

  const startReconciling = () => {
    leading = true;
    log(`leading (${o.identity}); reconciling`);
    controller.start();
    for (const obj of clusters.list()) own('StoreCluster')(obj);
    for (const obj of segments.list()) own('StoreSegment')(obj);
  };
  let lock: LeaderElector | undefined;
  if (o.leaderElect) {
    const lease = new K8sLease({
      namespace: o.leaseNamespace,
      name: o.leaseName,
      identity: o.identity,
      kubeConfig: kc,
      monoNow: () => performance.now(),
      wallNow: () => Date.now(),
    });
    lock = new LeaderElector({
      lease,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      onStartedLeading: startReconciling,
      onStoppedLeading: () => {
        if (stopping) return;
        // Another replica may already reconcile; exit so we restart as a clean follower.
        log('lost leadership; exiting');
        process.exit(1);
      },
      log,
    });
    lock.start();
  } else startReconciling();

  // Webhook: every replica serves it (the API server may call any).
  if (o.webhookPort !== undefined) {
    const lookup: ClusterLookup = (namespace, name) => {
      if (o.watchNamespace && namespace !== o.watchNamespace) return `the operator watches namespace ${o.watchNamespace} only`;
      const all = clusters.list().filter((c) => c.metadata?.namespace === namespace) as StoreCluster[];
      const pick = name ? all.find((c) => c.metadata?.name === name) : all.length === 1 ? all[0] : undefined;
      if (!pick) {
        if (name) return `StoreCluster ${namespace}/${name} not found`;
        return all.length
          ? `several StoreClusters in namespace ${namespace} (${all.map((c) => c.metadata?.name).join(', ')}); name one with the annotation`
          : `no StoreCluster in namespace ${namespace}`;
      }
      return defaultStoreCluster(pick, o.defaults);
    };
    const tls = new WebhookTls(api, {
      namespace: o.leaseNamespace,
      secretName: o.webhookSecret,
      serviceName: o.webhookService,
      webhookConfigName: o.webhookConfig,
      validityDays: 365,
      log,
    });
    const loadCert = async () => {
      if (o.certDir) return { cert: readFileSync(join(o.certDir, 'tls.crt'), 'utf8'), key: readFileSync(join(o.certDir, 'tls.key'), 'utf8') };
      const c = await tls.ensure(true);
      return { cert: c.tlsCert, key: c.tlsKey };
    };
    const server = new WebhookServer(await loadCert(), lookup, log);
    const port = await server.listen(o.webhookPort);
    log(`webhook serving https on :${port}/mutate-pods`);
    // Reload (cert-manager renews the mounted files) or rotate (self-managed; leader only).
    const t = setInterval(() => {
      const next =
        o.certDir && existsSync(join(o.certDir, 'tls.crt'))
          ? Promise.resolve({ cert: readFileSync(join(o.certDir, 'tls.crt'), 'utf8'), key: readFileSync(join(o.certDir, 'tls.key'), 'utf8') })
          : tls.ensure(leading).then((c) => ({ cert: c.tlsCert, key: c.tlsKey }));
      next.then((c) => server.setCertificate(c)).catch((e: Error) => log(`webhook certificate check failed: ${e.message}`));
    }, 10 * 60_000);
    t.unref();
  }

  const health = http.createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200);
      res.end('ok');
      return;
    }
    if (req.url === '/readyz') {
      res.writeHead(200);
      res.end(leading ? 'leader' : 'standby');
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((r) => health.listen(o.healthPort, r));
  log(`health on :${(health.address() as any).port}; watching ${o.watchNamespace ?? 'all namespaces'}`);

  const shutdown = async () => {
    stopping = true;
    log('shutting down');
    controller.stop();
    for (const i of informers) i.stop();
    await lock?.stop();
    health.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
}

export function defaultIdentity(): string {
  return process.env.POD_NAME ?? `${hostname()}-${process.pid}`;
}
