// Master end of the fast channel (docs/master-channel.md): decodes request frames of one
// connection, runs each through the dispatcher and encodes the reply straight into the outgoing
// frames; replies produced in one turn of the event loop leave together, in writes of up to
// FLUSH_FRAMES frames or FLUSH_BYTES bytes.
import type { Socket } from 'node:net';
import { FrameDecoder, FrameKind, FrameWriter, MAX_PAYLOAD_BYTES, MAX_REQUEST_PAYLOAD_BYTES } from '../common/channel-frame.js';
import { AUTH_FRAME_KIND, NOT_AUTHENTICATING } from '../common/cluster-secret.js';
import { ErrorCode } from '../common/error-code.js';
import type { Logger } from '../common/logger.js';
import { decodeWith, type MethodInfo } from '../common/master-proto.js';
import { MAX_REQUEST_ELEMENTS, packedFieldsOf, requestShapeProblem, type PackedFields } from '../common/request-shape.js';
import type { CopierPush, NoticeTarget } from './copier-push.js';
import type { RpcDispatcher, StatusResponse } from './rpc-dispatcher.js';
// The core's replica replies write their own bytes once this is loaded (master/replica-wire.ts).
import './replica-wire.js';

/** Replies queued in the kernel-bound buffer beyond which a connection's reading pauses. */
const MAX_UNSENT_BYTES = 16 * 1024 * 1024;
/**
 * A burst of requests (one read can carry a whole client window) is answered in groups of this
 * many frames or bytes rather than all at the end of the turn, so the client starts on the first
 * replies while the rest are being served: the two processes overlap instead of taking turns.
 */
const FLUSH_FRAMES = 16;
const FLUSH_BYTES = 64 * 1024;

/** What the RPC listener learns from a channel connection (rpc-listener.ts). */
export interface ChannelWatch {
  now(): number;
  /** After each read: bytes held of an incomplete frame, and when that frame began (-1: none). */
  held(bytes: number, since: number): void;
  /** The connection broke the framing and was closed. */
  protocolError(): void;
}

const NO_PAYLOAD = Buffer.alloc(0);

export class ChannelConnection implements NoticeTarget {
  private readonly writer: FrameWriter;
  /** Frames decoded so far, and when the incomplete frame held now began (-1: none). */
  private frames = 0;
  private partialSince = -1;
  private readonly decoder: FrameDecoder;
  /** Per method: the request's packed scalar fields, for the pre-decode shape check. */
  private readonly packed: PackedFields[];

  constructor(
    private readonly socket: Socket,
    private readonly methods: readonly MethodInfo[],
    private readonly dispatcher: RpcDispatcher,
    private readonly log: Logger,
    /** Replies bigger than this are refused with an ERROR frame (the client's frame limit). */
    private readonly maxReplyBytes = MAX_PAYLOAD_BYTES,
    private readonly watch?: ChannelWatch,
    /** Copy notices (copier-push.ts): a Ping asking for them binds its client to this connection. */
    private readonly push?: CopierPush,
  ) {
    this.writer = new FrameWriter((data) => {
      if (socket.destroyed) return;
      // A client that sends faster than it reads: stop reading its requests until replies drain.
      socket.write(data);
      if (socket.writableLength > MAX_UNSENT_BYTES && !socket.isPaused()) {
        socket.pause();
        socket.once('drain', () => socket.resume());
      }
    });
    this.packed = methods.map((m) => packedFieldsOf(m.requestCodec));
    // Requests are small; the 64 MB frame limit is for replies (the client keeps it).
    this.decoder = new FrameDecoder((kind, id, method, payload) => this.onFrame(kind, id, method, payload), MAX_REQUEST_PAYLOAD_BYTES);
    socket.on('data', this.onData);
    if (push !== undefined) socket.once('close', () => push.unbind(this));
    socket.on('error', (e) => log.debug(`channel ${socket.remoteAddress}:${socket.remotePort}: ${e.message}`));
  }

  /** Takes bytes received on the connection (also those that arrived with the magic). */
  readonly onData = (chunk: Buffer): void => {
    const before = this.frames;
    try {
      this.decoder.push(chunk);
    } catch (e) {
      this.log.warn(`channel ${this.socket.remoteAddress}:${this.socket.remotePort}: ${(e as Error).message}; closing`);
      this.socket.destroy();
      this.watch?.protocolError();
      return;
    }
    const w = this.watch;
    if (w === undefined) return;
    const held = this.decoder.buffered;
    // a frame begins when the bytes held no longer belong to the frame held before this read
    if (held === 0) this.partialSince = -1;
    else if (this.partialSince < 0 || this.frames !== before) this.partialSince = w.now();
    w.held(held, this.partialSince);
  };

  private onFrame(kind: number, id: number, methodIndex: number, payload: Buffer): void {
    this.frames++;
    const m = this.methods[methodIndex];
    if (kind !== FrameKind.REQUEST || !m) {
      // an AUTH frame: the client has a cluster secret, this master runs without one
      const why = kind === AUTH_FRAME_KIND ? NOT_AUTHENTICATING : !m ? `unknown method ${methodIndex}` : `unexpected frame kind ${kind}`;
      this.writer.pushPayload(FrameKind.ERROR, id, methodIndex, Buffer.from(why));
      return;
    }
    let req: object | undefined;
    let res: StatusResponse | Promise<StatusResponse> | undefined;
    // Refused before decoding: a request whose repeated field would build too many objects.
    const problem = requestShapeProblem(payload, MAX_REQUEST_ELEMENTS, this.packed[methodIndex]);
    if (problem !== undefined) res = this.dispatcher.invalid(methodIndex, 'channel', problem);
    else {
      try {
        req = decodeWith<object>(m.requestCodec, payload);
      } catch (e) {
        res = this.dispatcher.invalid(methodIndex, 'channel', (e as Error).message);
      }
    }
    if (req) {
      const push = this.push;
      if (push !== undefined && methodIndex === push.pingMethod) this.listen(push, req);
      res = this.dispatcher.serve(methodIndex, req, 'channel');
    }
    // an RPC served in steps (a whole-table walk) answers later; replies may come in any order
    if (res instanceof Promise) void res.then((r) => this.reply(id, methodIndex, r));
    else this.reply(id, methodIndex, res!);
  }

  /** A copier's Ping that asks for copy notices: they come to this connection from now on. */
  private listen(push: CopierPush, ping: { client_id?: unknown; can_copy?: unknown; copy_push?: unknown }): void {
    if (ping.copy_push === true && ping.can_copy === true && typeof ping.client_id === 'string' && ping.client_id.length > 0) push.bind(ping.client_id, this);
  }

  /** Queues a NOTICE frame (id 0, empty): it leaves with this turn's other frames. */
  notice(method: number): void {
    if (this.socket.destroyed) return;
    this.writer.pushPayload(FrameKind.NOTICE, 0, method, NO_PAYLOAD);
  }

  private reply(id: number, methodIndex: number, res: StatusResponse): void {
    const m = this.methods[methodIndex];
    try {
      const length = this.writer.pushMessage(FrameKind.RESPONSE, id, methodIndex, m.responseCodec, res);
      if (length > this.maxReplyBytes) {
        // The client would refuse the frame by closing the connection, failing every call on it.
        this.writer.dropLast();
        const why = `reply of ${length} bytes exceeds the ${this.maxReplyBytes}-byte frame limit; ask for fewer keys`;
        this.log.warn(`${m.name} over channel: ${why}`);
        this.writer.pushPayload(FrameKind.ERROR, id, methodIndex, Buffer.from(why));
      }
    } catch (e) {
      this.log.error(`${m.name}: cannot encode the response: ${(e as Error).message}`);
      this.writer.pushMessage(FrameKind.RESPONSE, id, methodIndex, m.responseCodec, { status_code: ErrorCode.INTERNAL_ERROR });
    }
    if (this.writer.queuedFrames >= FLUSH_FRAMES || this.writer.queued >= FLUSH_BYTES) this.writer.flush();
  }
}
