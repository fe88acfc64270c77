// A lock on a coordination.k8s.io/v1 Lease through @kubernetes/client-node's CoordinationV1Api:
// try to acquire it, renew our hold, release it, read who holds it. Who may write is decided by
// LeaseClaim (expiry by local observation); every write carries the resourceVersion just read, so
// of two candidates writing the same record only one succeeds (409 Conflict for the other).
// Holders may publish annotations on the Lease (the master its RPC address). One lock serves the
// operator's leader election and the master's k8s HA backend; the timing (when to renew, when a
// leader must stop) stays with each caller.
import { ApiException, CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { claimedSpec, LeaseClaim, releasedSpec, type Claim } from './lease-claim.js';

export interface K8sLeaseOptions {
  namespace: string;
  name: string;
  /** holderIdentity written while we hold the Lease (a pod name in a cluster). */
  identity: string;
  kubeConfig: KubeConfig;
  /** Monotonic clock (ms) for expiry observation. */
  monoNow: () => number;
  /** Wall clock (ms) for acquireTime/renewTime, which are for humans only. */
  wallNow: () => number;
}

export interface AcquireResult {
  acquired: boolean;
  /** The holder when not acquired ('' or undefined when unknown). */
  holder?: string;
  /** The Lease's annotations as read (a holder's published values). */
  annotations: Record<string, string>;
}

export function statusOf(e: unknown): number | undefined {
  if (e instanceof ApiException) return e.code;
  const c = (e as { code?: unknown; statusCode?: unknown } | undefined)?.code;
  return typeof c === 'number' ? c : undefined;
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

export class K8sLease {
  readonly description: string;
  private readonly api: CoordinationV1Api;
  private readonly claim: LeaseClaim;

  constructor(
    private readonly o: K8sLeaseOptions,
    defaultDurationMs = 15_000,
  ) {
    this.api = o.kubeConfig.makeApiClient(CoordinationV1Api);
    this.claim = new LeaseClaim(o.identity, defaultDurationMs);
    this.description = `k8s Lease ${o.namespace}/${o.name} as ${o.identity}`;
  }

  get identity(): string {
    return this.o.identity;
  }

  /** The Lease, or undefined when it does not exist. */
  async read(): Promise<V1Lease | undefined> {
    try {
      return await this.api.readNamespacedLease({ name: this.o.name, namespace: this.o.namespace });
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw e;
    }
  }

  /** The Lease as read, and what this process may do with it now (`wait`: another holder's claim still stands). */
  async readClaim(): Promise<{ lease: V1Lease | undefined; claim: Claim }> {
    const lease = await this.read();
    const claim = this.claim.decide(
      lease && { holder: lease.spec?.holderIdentity, durationSeconds: lease.spec?.leaseDurationSeconds, version: lease.metadata?.resourceVersion },
      this.o.monoNow(),
    );
    return { lease, claim };
  }

  /**
   * Takes the Lease if it is free, expired or already ours, holding it for `durationMs` and
   * publishing `annotations`. Resolves {acquired:false} when someone else holds it or won the
   * write; rejects on transport and server errors.
   */
  async tryAcquire(durationMs: number, annotations: Record<string, string> = {}): Promise<AcquireResult> {
    const lease = await this.read();
    const claim = this.claim.decide(
      lease && { holder: lease.spec?.holderIdentity, durationSeconds: lease.spec?.leaseDurationSeconds, version: lease.metadata?.resourceVersion },
      this.o.monoNow(),
    );
    const seen = { holder: lease?.spec?.holderIdentity ?? undefined, annotations: lease?.metadata?.annotations ?? {} };
    if (claim.do === 'wait') return { acquired: false, holder: claim.holder, annotations: seen.annotations };
    const wall = new V1MicroTime(this.o.wallNow());
    const spec = claimedSpec(claim.do, lease?.spec, this.o.identity, seconds(durationMs), wall);
    try {
      if (claim.do === 'create') {
        await this.api.createNamespacedLease({
          namespace: this.o.namespace,
          body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.o.name, namespace: this.o.namespace, annotations }, spec },
        });
      } else await this.write(lease!, annotations, [], spec);
      return { acquired: true, annotations };
    } catch (e) {
      // 409: another candidate wrote first (create: it exists; replace: our read is stale).
      if (statusOf(e) === 409) return { acquired: false, holder: seen.holder, annotations: seen.annotations };
      throw e;
    }
  }

  /**
   * Extends our hold by `durationMs`. true: still ours; false: definitely lost (another holder,
   * the Lease gone, or a concurrent write); rejects when the outcome is unknown.
   */
  async renew(durationMs: number, annotations: Record<string, string> = {}): Promise<boolean> {
    const lease = await this.read();
    if (!lease || lease.spec?.holderIdentity !== this.o.identity) return false;
    try {
      await this.write(lease, annotations, [], claimedSpec('renew', lease.spec, this.o.identity, seconds(durationMs), new V1MicroTime(this.o.wallNow())));
      return true;
    } catch (e) {
      if (statusOf(e) === 409) return false;
      throw e;
    }
  }

  /**
   * Gives the Lease up if we hold it (holder '', a 1 s duration, `dropAnnotations` removed), so a
   * successor need not wait out the lease. A concurrent write means it was no longer ours.
   */
  async release(dropAnnotations: string[] = []): Promise<void> {
    const lease = await this.read();
    if (!lease || lease.spec?.holderIdentity !== this.o.identity) return;
    try {
      await this.write(lease, {}, dropAnnotations, releasedSpec(lease.spec, new V1MicroTime(this.o.wallNow())));
    } catch (e) {
      if (statusOf(e) !== 409) throw e;
    }
  }

  /** Replaces the Lease as read (its resourceVersion is the precondition). */
  private async write(lease: V1Lease, set: Record<string, string>, drop: string[], spec: V1Lease['spec']): Promise<void> {
    const annotations = { ...(lease.metadata?.annotations ?? {}), ...set };
    for (const k of drop) delete annotations[k];
    const body: V1Lease = { ...lease, metadata: { ...lease.metadata, annotations }, spec };
    await this.api.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body });
  }
}
