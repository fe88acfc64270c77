// The I/O around standby-ranking.ts: before each acquire attempt a master publishes where its
// followed image stands (a record with a TTL in the election backend), and, when nobody leads,
// reads every record to decide whether its image may be imported (else it is discarded: this
// master starts empty if elected) and whether to campaign at all (not while another live standby
// holds a more advanced usable image). The position is also published when the leader's stream
// ends, so that the records read at the next election are the standbys' last positions. An
// unchanged position is written again only after a tenth of the record's TTL (a retry period at
// the defaults): a hurried election (election.ts) attempts ten times as often, not writes.
import type { ElectionBackend } from './election-backend.js';
import type { ElectorLog } from './leader-elector.js';
import { decideCampaign, encodeStandby, standbyRecordName, type ImagePosition } from './standby-ranking.js';

/** The image this master followed as a standby (replication-follower.ts). */
export interface FollowedImage {
  /** Where the image stands when it holds the whole state, else undefined. */
  position(): ImagePosition | undefined;
  /** Drops the image: it may not be imported. */
  discard(): void;
}

export type PrecheckResult = { skip: false } | { skip: true; leader?: string };

export class CampaignGuard {
  private lastAhead = '';
  /** The record last written, and when its write was sent. */
  private written: { value: string; at: number } | undefined;

  constructor(
    private readonly backend: ElectionBackend,
    private readonly self: () => string,
    private readonly image: FollowedImage,
    /** How long a standby's record outlives its last write. */
    private readonly ttlMs: number,
    private readonly log: ElectorLog,
    /** Monotonic ms. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Writes this master's standby record (where its image stands), unless written unchanged within
   * a tenth of its TTL. `force`: written anyway (the stream ended: the record's TTL must count from now).
   */
  async publish(force = false): Promise<void> {
    const self = this.self();
    if (self === '') return;
    const value = encodeStandby({ address: self, image: this.image.position() });
    const at = this.now();
    if (!force && this.written?.value === value && at - this.written.at < this.ttlMs / 10) return;
    await this.backend.putRecord(standbyRecordName(self), value, this.ttlMs);
    this.written = { value, at };
  }

  /** Before an acquire attempt: skip it while someone leads (no record read) or a more advanced standby lives. */
  async check(): Promise<PrecheckResult> {
    await this.publish();
    const leader = await this.backend.readLeader();
    // Our own address: a hold this process did not learn of (an acquire answered too late), or a
    // previous life's: the acquire decides, after the ranking.
    if (leader !== undefined && leader !== this.self()) {
      this.lastAhead = '';
      return { skip: true, leader };
    }
    const records = await this.backend.readRecords();
    const position = this.image.position();
    const d = decideCampaign(this.self(), position, records);
    if (position !== undefined && !d.usable) {
      this.image.discard();
      this.log.warn(
        `HA: the followed image is not usable (term ${position.epoch}, stream ${position.session} is not in the last leader's in-sync record: the leader dropped it, or a later term began): discarded; if elected, this master starts empty`,
      );
      await this.publish();
    }
    if (!d.campaign) {
      if (d.ahead !== this.lastAhead) this.log.info(`HA: not campaigning: standby ${d.ahead} is ahead (its image has more of the last leader's changes)`);
      this.lastAhead = d.ahead;
      return { skip: true };
    }
    this.lastAhead = '';
    return { skip: false };
  }
}
