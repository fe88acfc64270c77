// The I/O shell of the operator's leader election: every retry period it claims the Lease through
// the shared lock (acquire as a follower, renew as the leader), feeds the outcome stamped with its
// send time to the pure LeaderElection, arms a timer for the renew deadline so leadership ends on
// time even while a claim hangs, and calls back when leadership starts or stops.
import { realClock, type Cancel, type Clock } from '../../common/clock.js';
import type { K8sLease } from '../../common/k8s-lease.js';
import { LeaderElection, type ClaimOutcome, type ElectionConfig } from './leader-election.js';

export type LeaseLock = Pick<K8sLease, 'description' | 'tryAcquire' | 'renew' | 'release'>;

export interface LeaderElectorOptions extends ElectionConfig {
  lease: LeaseLock;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  log: (m: string) => void;
  /** Time of claims, the renew deadline and retries (default the real clock). */
  clock?: Clock;
}

export class LeaderElector {
  readonly election: LeaderElection;
  private tickTimer: Cancel | undefined;
  private deadlineTimer: Cancel | undefined;
  private stopped = false;
  private wasLeader = false;
  private lastProblem = '';
  private readonly clock: Clock;

  constructor(private readonly opts: LeaderElectorOptions) {
    this.election = new LeaderElection(opts);
    this.clock = opts.clock ?? realClock;
  }

  isLeader(): boolean {
    return this.election.isLeader();
  }

  start(): void {
    void this.tick();
  }

  /** Stops campaigning; a leader gives the Lease up so a successor need not wait it out. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.tickTimer?.();
    this.deadlineTimer?.();
    if (this.election.isLeader()) {
      this.election.stepDown();
      await this.opts.lease.release().catch((e: Error) => this.opts.log(`lease release failed: ${e.message}`));
    }
    this.transition();
  }

  private transition(): void {
    const leader = this.election.isLeader();
    if (leader && !this.wasLeader) this.opts.onStartedLeading();
    if (!leader && this.wasLeader) this.opts.onStoppedLeading();
    this.wasLeader = leader;
    this.deadlineTimer?.();
    if (leader && !this.stopped) {
      this.deadlineTimer = this.clock.schedule(Math.ceil(this.election.deadline - this.clock.now()), () => {
        this.election.checkDeadline(this.clock.now());
        this.transition();
      });
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const sentAt = this.clock.now();
    const duration = this.opts.leaseDurationMs;
    let outcome: ClaimOutcome;
    try {
      if (this.election.isLeader()) outcome = (await this.opts.lease.renew(duration)) ? 'held' : 'lost';
      else outcome = (await this.opts.lease.tryAcquire(duration)).acquired ? 'held' : 'lost';
      this.lastProblem = '';
    } catch (e) {
      outcome = 'error';
      const line = `${this.opts.lease.description}: ${(e as Error).message}`;
      if (line !== this.lastProblem) this.opts.log(line);
      this.lastProblem = line;
    }
    if (this.stopped) {
      // Won while stopping: give it straight back.
      if (outcome === 'held') await this.opts.lease.release().catch(() => undefined);
      return;
    }
    this.election.claimed(outcome, sentAt, this.clock.now());
    this.transition();
    this.tickTimer = this.clock.schedule(this.opts.retryPeriodMs, () => void this.tick());
  }
}
