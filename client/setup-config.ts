// The client's setup parameters (the spec's "Client setup parameters") and the environment
// variables it honours, validated up front into one normalized settings object. Pure: the
// environment is a parameter.
import { splitHostPort } from '../common/host-port.js';
import { parseSize } from '../common/size.js';
import { InvalidParamsError, UnavailableError } from './errors.js';
import { ErrorCode } from '../common/error-code.js';
import { parseEtcdAddress } from './metadata/etcd-metadata.js';
import { P2P_HANDSHAKE } from './metadata/p2p-metadata.js';

export interface ClientSetupConfig {
  /** Host name or address of this node; "host:port" also pins the transfer engine's port. */
  local_hostname: string;
  /** http://host:port/metadata, etcd://h:p[;h:p], redis://h:p or P2PHANDSHAKE. */
  metadata_server: string;
  /** Bytes (or "4GB") contributed to the cluster; 0 = pure client. */
  global_segment_size: number | string;
  /** Bytes (or "512MB") of registered staging buffer; 0 = pure server (no Get/Put). */
  local_buffer_size: number | string;
  /** tcp (default from MC_RPC_PROTOCOL, else tcp) or rdma (not available in this build). */
  protocol?: string;
  device_name?: string;
  /** host:port of the master (HA: etcd://h:p;h:p). */
  master_server_address: string;
  rdma_devices?: string;
}

export interface ClientSettings {
  host: string;
  /** Engine port pinned by local_hostname "host:port"; undefined: pick from the client port range. */
  enginePort: number | undefined;
  metadataServer: string;
  globalSegmentSize: number;
  localBufferSize: number;
  protocol: 'tcp';
  deviceName: string;
  masterAddress: string;
  setupRetries: number;
  /** Own-segment pieces are copied with memcpy instead of going through the engine (MC_STORE_MEMCPY, default off). */
  localMemcpy: boolean;
  hugepage: boolean;
  hugepageSize: '2MB' | '1GB';
  /** Result arena for large Get results (MC_STORE_RESULT_ARENA_SIZE, default local_buffer_size); 0: none. */
  resultArenaBytes: number;
}

type Env = Record<string, string | undefined>;

function bytes(name: string, v: number | string | undefined): number {
  if (v === undefined || v === null || v === '') throw new InvalidParamsError(`setup: ${name} is required (bytes, or a size such as "4GB"; 0 allowed)`);
  let n: number;
  try {
    n = typeof v === 'number' ? v : parseSize(String(v));
  } catch (e) {
    throw new InvalidParamsError(`setup: ${name}: ${(e as Error).message}`, { cause: e });
  }
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidParamsError(`setup: ${name} must be a non-negative integer number of bytes, got ${v}`);
  return n;
}

export const METADATA_SERVER_FORMS = 'http://host:port/path, etcd://host:port[;host:port], redis://host:port or P2PHANDSHAKE';

/**
 * Why `address` is not a metadata_server the client can open, or undefined when it is one: the
 * forms openMetadataStore picks a backend by, with the parts each backend needs to start.
 */
export function metadataServerProblem(address: string): string | undefined {
  const a = address.trim();
  const bad = (why: string) => `invalid metadata_server "${address}": ${why}; expected ${METADATA_SERVER_FORMS}`;
  if (a === P2P_HANDSHAKE) return undefined;
  if (/^https?:\/\//i.test(a)) {
    let url: URL;
    try {
      url = new URL(a);
    } catch {
      return bad('not a URL');
    }
    return url.hostname ? undefined : bad('no host');
  }
  if (/^etcd:\/\//i.test(a)) {
    try {
      parseEtcdAddress(a);
    } catch (e) {
      return bad((e as Error).message);
    }
    return undefined;
  }
  if (/^rediss?:\/\//i.test(a)) return /^rediss?:\/\/[^/]/i.test(a) ? undefined : bad('no redis host');
  return bad('unknown form');
}

function envBool(v: string | undefined): boolean | undefined {
  if (v === undefined || v === '') return undefined;
  return /^(1|true|yes|on)$/i.test(v.trim());
}

/** `segmentsLater`: the caller mounts segments after setup (addSegment), so both sizes may be 0. */
export function resolveSettings(cfg: ClientSetupConfig, env: Env = process.env, segmentsLater = false): ClientSettings {
  if (!cfg || typeof cfg !== 'object') throw new InvalidParamsError('setup: a configuration object is required');
  const hostname = String(cfg.local_hostname ?? '').trim();
  if (!hostname) throw new InvalidParamsError('setup: local_hostname is required (host name or address of this node)');
  let host = hostname;
  let enginePort: number | undefined;
  // "host" or "host:port" (the engine's port); a bare IPv6 address is a host.
  const hp = splitHostPort(hostname);
  if (hp) {
    host = hp.host;
    enginePort = hp.port;
  } else if (/^[^:]*:\d+$/.test(hostname)) throw new InvalidParamsError(`setup: local_hostname port out of range: ${hostname}`);
  const metadataServer = String(cfg.metadata_server ?? '').trim();
  if (!metadataServer) throw new InvalidParamsError(`setup: metadata_server is required (${METADATA_SERVER_FORMS})`);
  const metadataProblem = metadataServerProblem(metadataServer);
  if (metadataProblem) throw new InvalidParamsError(`setup: ${metadataProblem}`);
  const masterAddress = String(cfg.master_server_address ?? '').trim();
  if (!masterAddress) throw new InvalidParamsError('setup: master_server_address is required (host:port of the master)');
  const globalSegmentSize = bytes('global_segment_size', cfg.global_segment_size);
  const localBufferSize = bytes('local_buffer_size', cfg.local_buffer_size);
  if (globalSegmentSize === 0 && localBufferSize === 0 && !segmentsLater) {
    throw new InvalidParamsError('setup: global_segment_size and local_buffer_size are both 0: the client could neither store nor read');
  }
  const protocol = String(cfg.protocol || env.MC_RPC_PROTOCOL || 'tcp')
    .trim()
    .toLowerCase();
  if (protocol === 'rdma') {
    throw new UnavailableError('setup: protocol rdma: RDMA is not available in this build (no RDMA device or ibverbs library on this machine); use protocol "tcp"', {
      code: ErrorCode.NOT_IMPLEMENTED,
    });
  }
  if (protocol !== 'tcp') throw new InvalidParamsError(`setup: unknown protocol "${protocol}": expected tcp or rdma`);

  const retriesText = env.MC_STORE_CLIENT_SETUP_RETRIES;
  let setupRetries = 20;
  if (retriesText !== undefined && retriesText !== '') {
    const r = Number(retriesText);
    if (!Number.isInteger(r) || r < 0) throw new InvalidParamsError(`MC_STORE_CLIENT_SETUP_RETRIES must be a non-negative integer, got "${retriesText}"`);
    setupRetries = r;
  }
  const hugepageSize = (env.MC_STORE_HUGEPAGE_SIZE || '2MB').toUpperCase();
  if (hugepageSize !== '2MB' && hugepageSize !== '1GB') throw new InvalidParamsError(`MC_STORE_HUGEPAGE_SIZE must be 2MB or 1GB, got "${env.MC_STORE_HUGEPAGE_SIZE}"`);
  const arenaText = env.MC_STORE_RESULT_ARENA_SIZE;
  // By default as large as the local buffer: the user's budget for reads, now resident twice.
  const resultArenaBytes = arenaText === undefined || arenaText.trim() === '' ? localBufferSize : bytes('MC_STORE_RESULT_ARENA_SIZE', arenaText.trim());
  return {
    host,
    enginePort,
    metadataServer,
    globalSegmentSize,
    localBufferSize,
    protocol: 'tcp',
    deviceName: String(cfg.device_name ?? ''),
    masterAddress,
    setupRetries,
    localMemcpy: envBool(env.MC_STORE_MEMCPY) ?? false, // spec: default 0
    hugepage: envBool(env.MC_STORE_USE_HUGEPAGE) ?? false,
    hugepageSize,
    resultArenaBytes,
  };
}

/** Delay before registration attempt `attempt` (1-based): 100 ms doubling, capped at 2 s, +-20% jitter. */
export function setupBackoffMs(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(2000, 100 * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}
