// Who is at the other end of a Unix socket (SO_PEERCRED, which node:net does not expose): the
// store service checks it before serving a dummy client on its Unix socket (common/peer-uids.ts).
import type { Socket } from 'node:net';
import type { PeerCredentials } from '../common/peer-uids.js';
import { addon } from './addon.js';
import { TransferError } from './errors.js';

/** The credentials of the peer of a connected Unix socket's fd; null when the kernel does not say. */
export function peerCredentials(fd: number): PeerCredentials | null {
  try {
    return addon().peerCredentials(fd);
  } catch (e) {
    throw TransferError.from(e);
  }
}

/** peerCredentials() of a node:net socket (null for one without an fd, e.g. already closed). */
export function socketPeerCredentials(socket: Socket): PeerCredentials | null {
  // node:net keeps the descriptor on its libuv handle; there is no public accessor for it.
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? peerCredentials(fd) : null;
}
