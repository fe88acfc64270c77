// The I/O shell of leader election: reads and writes the coordination.k8s.io/v1 Lease every
// retry period, feeds the pure LeaderElection, and calls back when leadership starts or stops.
// Writes carry the read's resourceVersion, so two candidates cannot both win one round.
import type { KubeApi } from '../reconcile/kube-client.js';
import { LeaderElection, type ElectionConfig, type LeaseSpec } from './leader-election.js';

interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

export interface LeaseLockOptions extends ElectionConfig {
  namespace: string;
  name: string;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  log: (m: string) => void;
  monoNow?: () => number;
}

export class LeaseLock {
  private readonly election: LeaderElection;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private wasLeader = false;
  private readonly now: () => number;

  constructor(private readonly api: KubeApi, private readonly opts: LeaseLockOptions) {
    this.election = new LeaderElection(opts);
    this.now = opts.monoNow ?? (() => performance.now());
  }

  start(): void {
    void this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const lease = await this.api.get<Lease>({ kind: 'Lease', namespace: this.opts.namespace, name: this.opts.name }).catch(() => undefined);
    const spec = this.election.release(new Date().toISOString());
    if (spec && lease && lease.spec?.holderIdentity === this.opts.identity) {
      await this.api.replace({ ...lease, spec }).catch((e: Error) => this.opts.log(`lease release failed: ${e.message}`));
    }
    this.transition();
  }

  private transition(): void {
    const leader = this.election.isLeader();
    if (leader && !this.wasLeader) this.opts.onStartedLeading();
    if (!leader && this.wasLeader) this.opts.onStoppedLeading();
    this.wasLeader = leader;
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const ref = { kind: 'Lease', namespace: this.opts.namespace, name: this.opts.name };
    try {
      const lease = await this.api.get<Lease>(ref);
      const d = this.election.decide(lease?.spec, this.now(), new Date().toISOString());
      if (d.action !== 'wait') {
        try {
          if (d.action === 'create') {
            await this.api.create<Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.opts.name, namespace: this.opts.namespace }, spec: d.spec });
          } else {
            await this.api.replace<Lease>({ ...lease, apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', spec: d.spec });
          }
          this.election.written(true, d.spec, this.now());
        } catch (e) {
          this.election.written(false, d.spec, this.now());
          this.opts.log(`lease ${this.opts.name}: ${(e as Error).message}`);
        }
      }
    } catch (e) {
      this.election.checkDeadline(this.now());
      this.opts.log(`lease ${this.opts.name}: ${(e as Error).message}`);
    }
    this.transition();
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), this.opts.retryPeriodMs);
  }
}
