// Environment settings read by the native layer, as pure functions of an env object:
// client port range, huge pages, the mmap arena, local memcpy, the shm transport and its peer uids.
import { allowedPeerUids, parsePeerUids } from '../common/peer-uids.js';
import { parseSize } from '../common/size.js';

export const DEFAULT_CLIENT_MIN_PORT = 12300;
export const DEFAULT_CLIENT_MAX_PORT = 14300;
export const DEFAULT_ARENA_POOL_SIZE = 8 * 1024 ** 3;

type Env = NodeJS.ProcessEnv | Record<string, string | undefined>;

/** Valid client ports: 1024-32767 or 61000-65535 (skips Linux's default ephemeral range). */
export function isValidClientPort(port: number): boolean {
  return Number.isInteger(port) && ((port >= 1024 && port <= 32767) || (port >= 61000 && port <= 65535));
}

function parsePort(text: string | undefined): number | undefined {
  if (text === undefined || !/^\s*\d+\s*$/.test(text)) return undefined;
  const n = Number(text);
  return isValidClientPort(n) ? n : undefined;
}

/**
 * MC_STORE_CLIENT_MIN_PORT / MC_STORE_CLIENT_MAX_PORT: each falls back to its default
 * (12300 / 14300) when unset or invalid; if the result has max < min, both fall back.
 */
export function clientPortRange(env: Env = process.env): { min: number; max: number } {
  const min = parsePort(env.MC_STORE_CLIENT_MIN_PORT) ?? DEFAULT_CLIENT_MIN_PORT;
  const max = parsePort(env.MC_STORE_CLIENT_MAX_PORT) ?? DEFAULT_CLIENT_MAX_PORT;
  if (max < min) return { min: DEFAULT_CLIENT_MIN_PORT, max: DEFAULT_CLIENT_MAX_PORT };
  return { min, max };
}

export function isTruthyEnv(v: string | undefined): boolean {
  return v !== undefined && ['1', 'true', 'yes', 'on'].includes(v.trim().toLowerCase());
}

export type HugepageSize = '2MB' | '1GB';

export function hugepageSizeBytes(size: HugepageSize): number {
  return size === '1GB' ? 1024 ** 3 : 2 * 1024 ** 2;
}

/** MC_STORE_USE_HUGEPAGE=1 and MC_STORE_HUGEPAGE_SIZE (2MB default, or 1GB). */
export function hugepageDefaults(env: Env = process.env): { hugepage: boolean; hugepageSize: HugepageSize } {
  const raw = env.MC_STORE_HUGEPAGE_SIZE?.trim().toUpperCase();
  let hugepageSize: HugepageSize = '2MB';
  if (raw !== undefined && raw !== '') {
    if (raw === '2MB' || raw === '2M') hugepageSize = '2MB';
    else if (raw === '1GB' || raw === '1G') hugepageSize = '1GB';
    else throw new Error(`MC_STORE_HUGEPAGE_SIZE="${env.MC_STORE_HUGEPAGE_SIZE}" is not supported: use 2MB or 1GB`);
  }
  return { hugepage: isTruthyEnv(env.MC_STORE_USE_HUGEPAGE), hugepageSize };
}

/**
 * The arena for anonymous mappings: on when MC_MMAP_ARENA_POOL_SIZE is set (or a caller's flag
 * asks for it, then 8gb by default), off when MC_DISABLE_MMAP_ARENA is 1/true/yes/on.
 */
export function arenaConfig(env: Env = process.env, enabledByFlag = false): { enabled: boolean; poolSize: number } {
  if (isTruthyEnv(env.MC_DISABLE_MMAP_ARENA)) return { enabled: false, poolSize: 0 };
  const raw = env.MC_MMAP_ARENA_POOL_SIZE;
  if (raw !== undefined && raw.trim() !== '') {
    const poolSize = parseSize(raw);
    if (poolSize <= 0) throw new Error(`MC_MMAP_ARENA_POOL_SIZE="${raw}" must be a positive size such as 8gb`);
    return { enabled: true, poolSize };
  }
  return enabledByFlag ? { enabled: true, poolSize: DEFAULT_ARENA_POOL_SIZE } : { enabled: false, poolSize: 0 };
}

/** MC_STORE_MEMCPY: 1/true prefers memcpy when the endpoint is this engine's own. */
export function memcpyLocalDefault(env: Env = process.env): boolean {
  return isTruthyEnv(env.MC_STORE_MEMCPY);
}

/**
 * MC_STORE_SHM_TRANSPORT: same-host peers exchange bytes through shared mappings (memfd/shm fds
 * passed over a Unix socket) instead of loopback TCP. On unless 0/false/no/off.
 */
export function shmTransportDefault(env: Env = process.env): boolean {
  const v = env.MC_STORE_SHM_TRANSPORT;
  return v === undefined || v.trim() === '' || !['0', 'false', 'no', 'off'].includes(v.trim().toLowerCase());
}

/**
 * The uids whose processes the engine's shm control socket hands memory fds to: this process's
 * effective uid, root (common/peer-uids.ts says why) and MC_STORE_SHM_PEER_UIDS (comma-separated).
 * Peers of any other uid are told "not shareable" and use TCP.
 */
export function shmPeerUidsDefault(env: Env = process.env): number[] {
  return allowedPeerUids(process.geteuid?.() ?? 0, parsePeerUids(env.MC_STORE_SHM_PEER_UIDS ?? '', 'MC_STORE_SHM_PEER_UIDS'));
}
