// What tests that talk to the product below its client library need to pass the cluster secret
// (the run's STORE_CLUSTER_SECRET_FILE, e2e/global-secret.ts): a channel socket past the
// handshake, and the x-kvstore-auth header for an HTTP write.
import { connect, type Socket } from 'node:net';
import { CHANNEL_MAGIC } from '../common/channel-frame.js';
import { AUTH_HEADER, clientHandshake, clientSecret, signUrl, type FramedInterface } from '../common/cluster-secret.js';

/**
 * A socket to a KVC1 (or KVD1: `magic`, `iface`) listener, past the handshake when the run has a
 * secret (else the magic alone was sent); `rest`: bytes received after the handshake.
 */
export function channelSocket(
  address: string,
  magic = CHANNEL_MAGIC,
  iface: FramedInterface = 'master-channel',
  secret = clientSecret(),
): Promise<{ socket: Socket; rest: Buffer }> {
  const i = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const socket = connect(Number(address.slice(i + 1)), address.slice(0, i));
    socket.once('error', reject);
    socket.once('connect', () => {
      if (secret === undefined) {
        socket.write(magic);
        return resolve({ socket, rest: Buffer.alloc(0) });
      }
      clientHandshake(socket, secret, iface, magic).then((rest) => {
        socket.resume();
        resolve({ socket, rest });
      }, reject);
    });
  });
}

/** Headers carrying x-kvstore-auth for `method` on `url` with `body` (none without a secret). */
export function authHeaders(method: string, url: string, body?: string | Buffer, secret = clientSecret()): Record<string, string> {
  if (secret === undefined) return {};
  return { [AUTH_HEADER]: signUrl(secret, method, url, body) };
}
