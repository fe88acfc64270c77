// The timer-and-I/O shell around the Election state machine: asks it what to do, runs the
// backend call, feeds back the outcome stamped with the time the call was sent, and arms a timer
// for the renew deadline so leadership ends on time even while a renewal hangs.
import type { Cancel, Clock } from '../../common/clock.js';
import { Election, type ElectionTimings, type Transition } from './election.js';
import type { ElectionBackend } from './election-backend.js';

/** Runs before each acquire attempt: `skip` leaves the attempt out (campaign-guard.ts). */
export type Precheck = () => Promise<{ skip: boolean; leader?: string }>;

export interface ElectorLog {
  info(line: string): void;
  warn(line: string): void;
}

export interface ElectorEvents {
  /** We lead from now on (called synchronously with the state change). */
  elected(term: number): void;
  /** We stopped leading (called synchronously, before anything else can happen). */
  deposed(reason: string): void;
}

export class LeaderElector {
  readonly election: Election;
  private timer: Cancel | undefined;
  private stopped = true;
  private lastProblem = '';
  private lastLeaderSeen: string | undefined;

  constructor(
    private readonly backend: ElectionBackend,
    private readonly address: string,
    timings: ElectionTimings,
    private readonly clock: Clock,
    private readonly log: ElectorLog,
    private readonly events: ElectorEvents,
    private readonly precheck?: Precheck,
  ) {
    this.election = new Election(timings);
  }

  isServing(now: number): boolean {
    return this.election.isServing(now);
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.log.info(`HA: candidate for leadership as ${this.address} via ${this.backend.description}`);
    this.pump();
  }

  /** The leader is likely gone (a standby's stream from it ended): campaign more often for a while (election.ts). */
  hurry(): void {
    if (this.stopped) return;
    this.election.hurry(this.clock.now());
    this.pump();
  }

  /** Stops campaigning; a leader steps down at once and releases the record for a fast takeover. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.();
    this.timer = undefined;
    if (this.election.resign(this.clock.now()) === 'deposed') {
      this.events.deposed('shutting down');
      await Promise.all([
        this.backend.release(this.address).catch((e: Error) => this.log.warn(`HA: release on shutdown failed: ${e.message}`)),
        this.backend.onDeposed?.().catch((e: Error) => this.log.warn(`HA: post-deposition step failed: ${e.message}`)),
      ]);
    }
    await this.backend.close().catch(() => undefined);
  }

  private pump(): void {
    if (this.stopped) return;
    this.timer?.();
    this.timer = undefined;
    const now = this.clock.now();
    this.apply(this.election.check(now), 'renew deadline passed without a successful renewal');
    const step = this.election.next(now);
    if (step.do === 'wait') {
      if (Number.isFinite(step.untilMs)) {
        this.timer = this.clock.schedule(Math.ceil(step.untilMs - now), () => this.pump());
      }
      return;
    }
    const ttl = this.election.timings.leaseDurationMs;
    if (step.do === 'acquire') {
      this.election.acquireStarted(now);
      // The precheck's time counts as part of the attempt: `now` stays its send time (earlier is safe).
      const attempt = this.precheck
        ? this.precheck().then((p) => (p.skip ? { acquired: false, leader: p.leader } : this.backend.tryAcquire(this.address, ttl)))
        : this.backend.tryAcquire(this.address, ttl);
      attempt
        .then(
          (r) => {
            if (this.stopped && r.acquired) {
              void this.backend.release(this.address).catch(() => undefined);
              return;
            }
            if (!r.acquired && r.leader !== this.lastLeaderSeen) {
              this.lastLeaderSeen = r.leader;
              this.log.info(`HA: following; leader is ${r.leader ?? '(unknown)'}`);
            }
            this.problem('');
            this.apply(this.election.acquireDone(now, this.clock.now(), r.acquired, r.leader, this.address), '');
          },
          (e: Error) => {
            this.problem(`HA: acquire via ${this.backend.description} failed: ${e.message}`);
            this.apply(this.election.acquireDone(now, this.clock.now(), false), '');
          },
        )
        .finally(() => this.pump());
    } else {
      this.election.renewStarted(now);
      // The deadline timer keeps running while the renewal is in flight.
      this.timer = this.clock.schedule(Math.ceil(this.election.servingDeadline - now), () => this.pump());
      this.backend
        .renew(this.address, ttl)
        .then(
          (ok) => {
            if (ok) this.problem('');
            this.apply(this.election.renewDone(now, this.clock.now(), ok ? 'renewed' : 'lost'), 'the leader record is no longer ours');
          },
          (e: Error) => {
            this.problem(`HA: renewal via ${this.backend.description} failed: ${e.message}`);
            this.apply(this.election.renewDone(now, this.clock.now(), 'error'), 'renew deadline passed without a successful renewal');
          },
        )
        .finally(() => this.pump());
    }
  }

  /** Logs a failure once until it changes or clears. */
  private problem(line: string): void {
    if (line !== '' && line !== this.lastProblem) this.log.warn(line);
    this.lastProblem = line;
  }

  /** Acts on a transition. */
  private apply(t: Transition, reason: string): void {
    if (t === 'elected') {
      this.lastLeaderSeen = this.address;
      this.events.elected(this.election.term);
      this.backend.onElected?.().catch((e: Error) => this.log.warn(`HA: post-election step failed: ${e.message}`));
      return;
    }
    if (t === 'deposed') {
      this.events.deposed(reason);
      this.lastLeaderSeen = undefined;
      this.backend.onDeposed?.().catch((e: Error) => this.log.warn(`HA: post-deposition step failed: ${e.message}`));
      if (!this.stopped) void this.backend.release(this.address).catch(() => undefined);
    }
  }
}
