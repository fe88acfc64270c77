// A standby's side of following the leader (docs/ha.md "Standbys"): while this master does not
// lead, it connects to the leader's RPC port (the address the election publishes) with the magic
// "KVR1", applies every LeaderMessage to a StateImage and acknowledges it with the leader's change
// count. When elected, the master takes the image (only once it was synced with the leader: a
// partial image is worse than none) and imports it into its new core. A lost connection is tried
// again every RETRY_MS, to whichever master is the leader by then, from a reset. The image's
// position (the leader's term, this stream's session, the changes applied) is what the election
// ranks and checks against the leader's in-sync record (master/ha/standby-ranking.ts).
// With a cluster secret the connection first passes the "master-replication" handshake
// (common/cluster-secret.ts).
import { connect, type Socket } from 'node:net';
import { clientHandshake } from '../../common/cluster-secret.js';
import type { Logger } from '../../common/logger.js';
import type { LeaderMessage__Output } from '../../proto/gen/store/LeaderMessage.js';
import { decodeWith, encodeWith, fileFrame, stateCodec } from '../../common/state-proto.js';
import type { ImagePosition } from '../ha/standby-ranking.js';
import { FrameReader } from './frame-reader.js';
import { REPLICATION_MAGIC } from './replication-leader.js';
import { StateImage } from './state-image.js';

const leaderCodec = stateCodec('LeaderMessage');
const followerCodec = stateCodec('FollowerMessage');
const RETRY_MS = 300;

export interface ReplicationFollowerOptions {
  /** The leader's host:port as the election knows it now ('' or undefined: unknown). */
  leader: () => string | undefined;
  /** This master's own advertised address (never followed). */
  self: () => string;
  clock: () => number;
  log: Logger;
  /** The stream from a leader ended (the image's position is final until the next stream). */
  ended?: () => void;
  /** The cluster secret to prove to the leader (undefined: the masters run unauthenticated). */
  secret?: Buffer;
}

export class ReplicationFollower {
  private readonly image = new StateImage();
  private socket: Socket | undefined;
  private target = '';
  private synced_ = false;
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  /** The leader's change count applied so far. */
  private applied = 0;
  /** The leader's term (view_version) and this stream's session, from the stream's reset. */
  private epoch = 0;
  private session = '';

  constructor(private readonly o: ReplicationFollowerOptions) {}

  /** Whether the image holds the whole state of the leader followed (and its changes since). */
  get synced(): boolean {
    return this.synced_;
  }

  get following(): string {
    return this.socket ? this.target : '';
  }

  get objectCount(): number {
    return this.image.objectCount;
  }

  /** Where the image stands when it holds the whole state of a leader, else undefined. */
  position(): ImagePosition | undefined {
    return this.synced_ ? { epoch: this.epoch, session: this.session, seq: this.applied } : undefined;
  }

  /** Drops the image (it may not be imported); the next stream starts from a reset anyway. */
  discard(): void {
    this.image.reset();
    this.synced_ = false;
  }

  /** Starts following whoever leads (again, from a reset). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.tryConnect();
  }

  /**
   * Stops following; returns the image when it was synced (this master was elected), else
   * undefined. The image is handed over: the follower starts from a reset next time.
   */
  stop(): StateImage | undefined {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.socket?.destroy();
    this.socket = undefined;
    const image = this.synced_ ? this.image : undefined;
    this.synced_ = false;
    return image;
  }

  private retryLater(): void {
    if (!this.running || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.tryConnect();
    }, RETRY_MS);
    this.timer.unref();
  }

  private tryConnect(): void {
    if (!this.running || this.socket) return;
    const leader = this.o.leader();
    if (!leader || leader === this.o.self()) return this.retryLater();
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(leader);
    if (!m) return this.retryLater();
    this.target = leader;
    const socket = connect({ host: m[1], port: Number(m[2]), noDelay: true });
    this.socket = socket;
    let opened = false;
    const reader = new FrameReader((body) => this.onMessage(socket, decodeWith<LeaderMessage__Output>(leaderCodec, body)));
    const follow = (rest: Buffer): void => {
      socket.on('data', (d: Buffer) => {
        if (!reader.push(d)) socket.destroy();
      });
      if (rest.length > 0 && !reader.push(rest)) socket.destroy();
      socket.resume();
    };
    socket.once('connect', () => {
      opened = true;
      const secret = this.o.secret;
      if (secret === undefined) {
        socket.write(REPLICATION_MAGIC);
        return follow(Buffer.alloc(0));
      }
      clientHandshake(socket, secret, 'master-replication', REPLICATION_MAGIC).then(follow, (e: Error) => {
        this.o.log.warn(`HA: replication from leader ${leader}: ${e.message}`);
        socket.destroy();
      });
    });
    socket.on('error', () => {});
    socket.once('close', () => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      if (opened && this.running)
        this.o.log.warn(
          `HA: replication from leader ${leader} ended; ${this.synced_ ? `keeping the state (${this.image.objectCount} objects)` : 'the state was not complete'}; trying again`,
        );
      this.retryLater();
      if (opened) this.o.ended?.();
    });
  }

  private onMessage(socket: Socket, m: LeaderMessage__Output): void {
    if (this.socket !== socket) return;
    const now = this.o.clock();
    if (m.reset) {
      this.image.reset();
      this.synced_ = false;
      this.epoch = Number(m.view_version);
      this.session = m.session;
    }
    for (const c of m.changes) this.image.apply(c, now);
    this.applied = Number(m.seq);
    if (m.synced) {
      this.synced_ = true;
      this.o.log.info(`HA: following leader ${this.target}: synced with ${this.image.segmentCount} segments, ${this.image.objectCount} objects`);
    }
    socket.write(fileFrame(encodeWith(followerCodec, { acked_seq: this.applied })));
  }
}
