// Master end of the fast channel (docs/master-channel.md): decodes request frames of one
// connection, runs each through the dispatcher and queues the reply frame; replies produced in
// one turn of the event loop leave in one socket write.
import type { Socket } from 'node:net';
import { FrameDecoder, FrameKind, FrameWriter, encodeFrame } from '../common/channel-frame.js';
import type { Logger } from '../common/logger.js';
import { decodeMessage, encodeMessage, type MethodInfo } from '../common/master-proto.js';
import type { RpcDispatcher } from './rpc-dispatcher.js';

export class ChannelConnection {
  private readonly writer: FrameWriter;
  private readonly decoder: FrameDecoder;

  constructor(
    private readonly socket: Socket,
    private readonly methods: readonly MethodInfo[],
    private readonly dispatcher: RpcDispatcher,
    private readonly log: Logger,
  ) {
    this.writer = new FrameWriter((data) => {
      if (!socket.destroyed) socket.write(data);
    });
    this.decoder = new FrameDecoder((kind, id, method, payload) => this.onFrame(kind, id, method, payload));
    socket.on('data', this.onData);
    socket.on('error', (e) => log.debug(`channel ${socket.remoteAddress}:${socket.remotePort}: ${e.message}`));
  }

  /** Takes bytes received on the connection (also those that arrived with the magic). */
  readonly onData = (chunk: Buffer): void => {
    try {
      this.decoder.push(chunk);
    } catch (e) {
      this.log.warn(`channel ${this.socket.remoteAddress}:${this.socket.remotePort}: ${(e as Error).message}; closing`);
      this.socket.destroy();
    }
  };

  private onFrame(kind: number, id: number, methodIndex: number, payload: Buffer): void {
    const m = this.methods[methodIndex];
    if (kind !== FrameKind.REQUEST || !m) {
      const why = !m ? `unknown method ${methodIndex}` : `unexpected frame kind ${kind}`;
      this.writer.push(encodeFrame(FrameKind.ERROR, id, methodIndex, Buffer.from(why)));
      return;
    }
    let req: object | undefined;
    let res;
    try {
      req = decodeMessage<object>(m.requestType, payload);
    } catch (e) {
      res = this.dispatcher.invalid(methodIndex, 'channel', (e as Error).message);
    }
    if (req) res = this.dispatcher.invoke(methodIndex, req, 'channel');
    let bytes: Uint8Array;
    try {
      bytes = encodeMessage(m.responseType, res as object);
    } catch (e) {
      this.log.error(`${m.name}: cannot encode the response: ${(e as Error).message}`);
      bytes = encodeMessage(m.responseType, { status_code: -1 });
    }
    this.writer.push(encodeFrame(FrameKind.RESPONSE, id, methodIndex, bytes));
  }
}
