// Which local users may use this process's same-host interfaces (the transfer engine's shm
// control socket, which hands out segment fds, and the store service's dummy-client Unix socket):
// the process's own effective uid, root, and the uids an operator lists (MC_STORE_SHM_PEER_UIDS,
// --peer_uids). Root is in by default: it can read the shared directory's files and, on the host,
// any process's memory anyway, and refusing it would cut off the usual injected pod (an inference
// container running as root beside the store sidecar's uid 1000). Pure: the credentials come from
// SO_PEERCRED (native peerCredentials()).

export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

const MAX_UID = 0xffff_ffff;

/** Parses "1000,1001" (spaces allowed; '' is none); throws a message naming `what` otherwise. */
export function parsePeerUids(text: string, what: string): number[] {
  const out: number[] = [];
  for (const part of text.split(',')) {
    const t = part.trim();
    if (t === '') continue;
    const n = /^\d+$/.test(t) ? Number(t) : NaN;
    if (!Number.isSafeInteger(n) || n > MAX_UID) throw new Error(`${what}: "${t}" is not a uid (a comma-separated list of numbers such as 1000,1001)`);
    out.push(n);
  }
  return out;
}

/** Root, the uid every process may be reached by (see above). */
export const ROOT_UID = 0;

/** This process's effective uid, root, then `extra`, without repeats. */
export function allowedPeerUids(ownUid: number, extra: readonly number[]): number[] {
  return [...new Set([ownUid, ROOT_UID, ...extra])];
}

/** A peer the kernel could not name (null) is never allowed. */
export function peerUidAllowed(cred: PeerCredentials | null, allowed: readonly number[]): boolean {
  return cred !== null && allowed.includes(cred.uid);
}

/** The log line of a refused peer. */
export function peerRefusal(where: string, cred: PeerCredentials | null, allowed: readonly number[], flag: string): string {
  const who = cred === null ? 'a peer of unknown uid' : `pid ${cred.pid} uid ${cred.uid}`;
  return `${where}: refused ${who}: not an allowed uid (allowed: ${allowed.join(',')}; ${flag} adds more)`;
}
