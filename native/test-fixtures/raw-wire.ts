// Test helper: the engine's TCP wire format (native/src/wire.h, version 2) spoken by hand over a
// raw node:net socket, to play peers the engine must survive: slow, half-sent, old, garbage.
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { proof, TCP_HELLO } from './auth-wire.js';

export const REQUEST_MAGIC = 0x3252564b; // "KVR2"
export const REQUEST_MAGIC_V1 = 0x4b565251; // "KVRQ", the old format
export const RESPONSE_MAGIC = 0x3250564b;
export const WireStatus = { OK: 0, OUT_OF_RANGE: 1, BAD_REQUEST: 2, STALE: 3, FENCED: 4 } as const;

export interface RawRequest {
  op: 'read' | 'write';
  requestId?: number;
  address: number;
  length: number;
  rangeStart?: number;
  rangeLength?: number;
  incarnation?: number;
  generation?: number;
}

export function requestHeader(r: RawRequest): Buffer {
  const h = Buffer.alloc(64);
  h.writeUInt32LE(REQUEST_MAGIC, 0);
  h.writeUInt16LE(r.op === 'read' ? 1 : 2, 4);
  h.writeBigUInt64LE(BigInt(r.requestId ?? 1), 8);
  h.writeBigUInt64LE(BigInt(r.address), 16);
  h.writeBigUInt64LE(BigInt(r.length), 24);
  h.writeBigUInt64LE(BigInt(r.rangeStart ?? r.address), 32);
  h.writeBigUInt64LE(BigInt(r.rangeLength ?? r.length), 40);
  h.writeBigUInt64LE(BigInt(r.incarnation ?? 0), 48);
  h.writeBigUInt64LE(BigInt(r.generation ?? 0), 56);
  return h;
}

/** A raw connection: collects what the engine sends, and knows when the engine closed it. */
export interface RawConn {
  sock: Socket;
  /** Resolves when the connection is closed (by either side). */
  closed: Promise<void>;
  isClosed(): boolean;
  /** The next response's status (its header and any READ payload consumed). */
  response(): Promise<number>;
}

/**
 * A raw connection; with `secret` (the engine's authSecret) it first passes the engine's
 * handshake (interface transfer-tcp, test-fixtures/auth-wire.ts) and throws when refused.
 */
export async function rawConnect(endpoint: string, localAddress?: string, secret?: Buffer): Promise<RawConn> {
  const i = endpoint.lastIndexOf(':');
  const sock = connect({ host: endpoint.slice(0, i), port: Number(endpoint.slice(i + 1)), localAddress });
  await new Promise<void>((res, rej) => {
    sock.once('connect', () => res());
    sock.once('error', rej);
  });
  let buffered = Buffer.alloc(0);
  let wake: (() => void) | undefined;
  let closedFlag = false;
  sock.on('data', (d: Buffer) => {
    buffered = Buffer.concat([buffered, d]);
    wake?.();
  });
  sock.on('error', () => {}); // a reset is one way of being cut off; `closed` reports it
  const closed = new Promise<void>((res) =>
    sock.once('close', () => {
      closedFlag = true;
      wake?.();
      res();
    }),
  );
  if (secret) {
    const take = async (n: number) => {
      while (buffered.length < n && !closedFlag) await new Promise<void>((res) => (wake = res));
      if (buffered.length < n) throw new Error(`engine ${endpoint} closed the connection during the handshake`);
      const out = buffered.subarray(0, n);
      buffered = buffered.subarray(n);
      return out;
    };
    sock.write(Buffer.from(Uint32Array.of(TCP_HELLO).buffer));
    const ns = await take(32);
    const nc = randomBytes(32);
    sock.write(Buffer.concat([nc, proof(secret, 'client', 'transfer-tcp', ns, nc)]));
    if (!(await take(32)).equals(proof(secret, 'server', 'transfer-tcp', ns, nc))) throw new Error(`engine ${endpoint} did not prove the secret`);
  }
  return {
    sock,
    closed,
    isClosed: () => closedFlag,
    async response() {
      const need = async (n: number) => {
        while (buffered.length < n) {
          if (closedFlag) throw new Error('connection closed before a whole response');
          await new Promise<void>((res) => (wake = res));
        }
      };
      await need(24);
      const magic = buffered.readUInt32LE(0);
      const status = buffered.readInt32LE(4);
      const length = Number(buffered.readBigUInt64LE(16));
      if (magic !== RESPONSE_MAGIC) throw new Error(`bad response magic ${magic.toString(16)}`);
      await need(24 + length);
      buffered = buffered.subarray(24 + length);
      return status;
    },
  };
}
