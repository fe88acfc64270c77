// Flags and configuration of the standalone store service (bin store_service): the spec's JSON
// config file (--config) and command-line flags, flags overriding the file. Pure: the file reader
// is a parameter. Errors are FlagErrors naming the flag or key; the binary exits 2 on them.
import { readFileSync } from 'node:fs';
import { FlagError, FlagTable, type FlagSpec, type FlagValue } from '../common/flags.js';
import { loggingFlags } from '../common/logger.js';
import { metadataServerProblem, type ClientSetupConfig } from '../client/setup-config.js';
import { parsePeerUids } from '../common/peer-uids.js';

/** --max_segment_size default: the spec leaves the number open; 64 GiB keeps a 1 TiB region at 16 segments. */
export const MAX_SEGMENT_SIZE_DEFAULT = 64 * 1024 ** 3;

const specs: FlagSpec[] = [
  {
    name: 'config',
    kind: 'string',
    default: '',
    help: 'JSON file with local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol, device_name, master_server_address',
  },
  { name: 'host', kind: 'string', default: '0.0.0.0', help: 'bind address of the HTTP server (/health)' },
  { name: 'port', kind: 'int', default: 8080, min: 0, max: 65535, help: 'HTTP server port (0: any free port)' },
  { name: 'rpc_port', kind: 'int', default: 50052, min: 0, max: 65535, help: 'dummy-client RPC port (ClientService: KVD1 channel and gRPC), bound to --host; 0: any free port' },
  {
    name: 'threads',
    kind: 'int',
    default: 1,
    min: 1,
    max: 64,
    help: "threads moving dummy clients' bytes per peer (the transfer engine's I/O threads; RPCs run on the event loop). Given explicitly it sets the engine's connections per peer; when not given the engine keeps its default of 4",
  },
  {
    name: 'shm_dir',
    kind: 'string',
    default: '',
    defaultText: '$STORE_SHM_DIR or /dev/shm',
    help: "shared directory of dummy clients' region files and of the dummy-client Unix socket (kvstore-<rpc_port>.sock); 'none' disables the socket",
  },
  {
    name: 'peer_uids',
    kind: 'string',
    default: '',
    help: "uids allowed besides this process's own and root (comma-separated): on the dummy-client Unix socket, and to receive segment fds over the transfer engine's same-host socket (MC_STORE_SHM_PEER_UIDS adds more there). A dummy client of another uid is refused on the socket (it may use --rpc_port)",
  },
  {
    name: 'cluster_secret_file',
    kind: 'string',
    default: '',
    defaultText: '$STORE_CLUSTER_SECRET_FILE',
    help: 'file holding the cluster secret (>= 32 bytes; "store secret new FILE" makes one): proven to the master and peers, and required of dummy clients and REST mount calls',
  },
  {
    name: 'allow_unauthenticated',
    kind: 'bool',
    default: false,
    help: 'run without a cluster secret (also STORE_ALLOW_UNAUTHENTICATED=1); without it or a secret the store service refuses to start',
  },
  { name: 'local_hostname', kind: 'string', default: 'localhost', help: 'host name or address of this node, as peers reach its transfer engine; host:port pins the engine port' },
  { name: 'metadata_server', kind: 'string', default: 'http://localhost:8080/metadata', help: 'http://host:port/metadata, etcd://h:p[;h:p], redis://h:p or P2PHANDSHAKE' },
  { name: 'master_server', kind: 'string', default: 'localhost:50051', help: 'host:port of the master (etcd://h:p;h:p or redis://h:p for HA masters)' },
  { name: 'master_server_address', kind: 'string', default: '', defaultText: 'localhost:50051', help: "the spec's name for --master_server (either may be given)" },
  { name: 'global_segment_size', kind: 'size', default: 4 * 1024 ** 3, defaultText: '4GB', help: 'memory contributed to the cluster (with units: 4GB, 512MB)' },
  {
    name: 'local_buffer_size',
    kind: 'size',
    default: 64 * 1024 ** 2,
    defaultText: '64MB',
    help: "registered staging buffer: dummy clients' calls whose values are not in shared memory are staged here (0: pure server, dummy clients' Get/Put refused)",
  },
  { name: 'protocol', kind: 'enum', default: 'tcp', values: ['tcp', 'rdma'], help: 'transfer protocol (rdma is not available in this build)' },
  {
    name: 'prefault_segment',
    kind: 'bool',
    default: true,
    help: 'touch every page of the segment at startup (no first-touch faults under peer writes; fails early without the memory)',
  },
  { name: 'device_name', kind: 'string', default: '', help: 'transfer-engine device name' },
  {
    name: 'max_segment_size',
    kind: 'size',
    default: MAX_SEGMENT_SIZE_DEFAULT,
    defaultText: '64GB',
    help: 'largest segment the REST mount API creates; a bigger region is split into several (a multiple of 4 KiB)',
  },
  {
    name: 'shutdown_grace_seconds',
    kind: 'float',
    default: 5,
    min: 0,
    max: 3600,
    help: 'on SIGTERM/SIGINT every segment stays readable (closed to new allocations) this long, then the read lease runs out, then the memory goes (0: at once)',
  },
  {
    name: 'default_kv_lease_ttl',
    kind: 'duration',
    default: 5000,
    unit: 'ms',
    help: "the master's read lease (its --default_kv_lease_ttl): how long memory outlives a segment's final unmount, so reads granted before it can finish",
  },
  {
    name: 'enable_cxl',
    kind: 'bool',
    default: false,
    help: 'mount CXL memory (a DAX device, or a file standing in for one) as a segment of its own ($MC_CXL_DEV_PATH enables it too)',
  },
  { name: 'cxl_path', kind: 'string', default: '/dev/dax0.0', help: 'the DAX device or file mapped with --enable_cxl ($MC_CXL_DEV_PATH overrides it)' },
  { name: 'cxl_size', kind: 'size', default: 8 * 1024 ** 3, defaultText: '8GB', help: 'bytes of it mounted ($MC_CXL_DEV_SIZE overrides it); a file must hold at least that many' },
  {
    name: 'offload_dir',
    kind: 'string',
    default: '',
    defaultText: '$STORE_OFFLOAD_DIR or none',
    help: "directory on this host's SSD for the SSD tier: a sparse file of --offload_size is mapped there and mounted as offload segments (the master's --enable_offload copies objects to it); empty: no SSD tier",
  },
  {
    name: 'offload_size',
    kind: 'size',
    default: 0,
    defaultText: '$STORE_OFFLOAD_SIZE or 0',
    help: 'bytes of the SSD tier (a multiple of 4096; with --offload_dir)',
  },
  {
    name: 'tls_cert',
    kind: 'string',
    default: '',
    help: 'PEM certificate: the HTTP port (REST API) and gRPC on --rpc_port then speak TLS only (KVD1 stays plain TCP); re-read when the file changes',
  },
  { name: 'tls_key', kind: 'string', default: '', help: 'PEM private key of --tls_cert' },
  { name: 'tls_ca', kind: 'string', default: '', help: 'PEM CA bundle: with it the TLS interfaces require client certificates signed by it (mTLS)' },
  ...loggingFlags,
];

// --config is its config file (the spec's JSON keys); the generic --config_path is left out.
export const storeServiceFlags = new FlagTable('store_service', specs, { configPath: false });

/** Keys of the spec's JSON file -> the flag carrying the same setting. */
const fileKeys: Record<string, string> = {
  local_hostname: 'local_hostname',
  metadata_server: 'metadata_server',
  global_segment_size: 'global_segment_size',
  local_buffer_size: 'local_buffer_size',
  protocol: 'protocol',
  device_name: 'device_name',
  master_server_address: 'master_server_address',
  master_server: 'master_server',
};

export interface StoreServiceConfig {
  client: ClientSetupConfig;
  host: string;
  port: number;
  rpcPort: number;
  /** --threads when given on the command line or in a file, else undefined (the engine's default). */
  threads: number | undefined;
  /** Shared directory of region files and the Unix socket; '' when disabled. */
  shmDir: string;
  /** --peer_uids: uids allowed besides this process's own on its same-host sockets. */
  peerUids: number[];
  /** Besides this process's uid, those that receive segment fds: MC_STORE_SHM_PEER_UIDS and --peer_uids. */
  shmPeerUids: number[];
  /** Largest segment of the REST mount API (bytes, a multiple of 4 KiB). */
  maxSegmentSize: number;
  /** Grace period of the unmounts at SIGTERM/SIGINT (seconds; 0: immediate). */
  shutdownGraceSeconds: number;
  /** The master's read lease TTL (ms). */
  leaseTtlMs: number;
  /** CXL memory mounted as a segment of its own (--enable_cxl or MC_CXL_DEV_PATH), else undefined. */
  cxl: { path: string; size: number } | undefined;
  /** The SSD tier (--offload_dir/--offload_size or STORE_OFFLOAD_DIR/STORE_OFFLOAD_SIZE), else undefined. */
  offload: { dir: string; size: number } | undefined;
  /** --tls_cert/--tls_key/--tls_ca as given ('' when not). */
  tls: { cert: string; key: string; ca: string };
  values: Record<string, FlagValue>;
}

export function parseStoreServiceArgs(
  argv: readonly string[],
  readFile: (p: string) => string = (p) => readFileSync(p, 'utf8'),
  env: Record<string, string | undefined> = process.env,
): StoreServiceConfig {
  const parsed = storeServiceFlags.parse(argv, readFile);
  const v = { ...parsed.values };
  const explicit = new Set(parsed.explicit);
  const path = v.config as string;
  if (path) {
    let doc: unknown;
    try {
      doc = JSON.parse(readFile(path));
    } catch (e) {
      throw new FlagError('--config', `cannot read --config=${path}: ${(e as Error).message}`);
    }
    if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new FlagError('--config', `--config=${path} must hold a JSON object`);
    for (const [key, raw] of Object.entries(doc as Record<string, unknown>)) {
      const flag = fileKeys[key];
      if (!flag) throw new FlagError(key, `unknown key "${key}" in --config=${path} (known: ${Object.keys(fileKeys).join(', ')})`);
      if (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'boolean')
        throw new FlagError(key, `invalid value for "${key}" in --config=${path}: expected a string or number`);
      if (parsed.explicit.has(flag)) continue; // the command line wins
      explicit.add(flag);
      v[flag] = storeServiceFlags.convert(storeServiceFlags.spec(flag)!, String(raw), `${key} (in ${path})`);
    }
  }
  if (explicit.has('master_server_address')) {
    if (explicit.has('master_server') && v.master_server !== v.master_server_address) {
      throw new FlagError('--master_server_address', `--master_server=${v.master_server} and --master_server_address=${v.master_server_address} disagree; give one`);
    }
    v.master_server = v.master_server_address;
  }
  const shmFlag = v.shm_dir as string;
  const shmDir = shmFlag === 'none' ? '' : shmFlag || env.STORE_SHM_DIR || '/dev/shm';
  const cxl = cxlMemory(v, env);
  if ((v.global_segment_size as number) === 0 && (v.local_buffer_size as number) === 0 && cxl === undefined) {
    throw new FlagError('--global_segment_size', 'a store service needs --global_segment_size > 0 (or a --local_buffer_size, or CXL memory): it would hold nothing');
  }
  // Checked here too, so a typo exits 2 naming the flag instead of failing setup later.
  const maxSeg = v.max_segment_size as number;
  if (maxSeg <= 0 || maxSeg % 4096 !== 0) throw new FlagError('--max_segment_size', `--max_segment_size must be a positive multiple of 4096 bytes, got ${maxSeg}`);
  let peerUids: number[];
  let envPeerUids: number[];
  try {
    peerUids = parsePeerUids(v.peer_uids as string, '--peer_uids');
  } catch (e) {
    throw new FlagError('--peer_uids', (e as Error).message);
  }
  try {
    envPeerUids = parsePeerUids(env.MC_STORE_SHM_PEER_UIDS ?? '', 'MC_STORE_SHM_PEER_UIDS');
  } catch (e) {
    throw new FlagError('MC_STORE_SHM_PEER_UIDS', (e as Error).message);
  }
  const metadataProblem = metadataServerProblem(v.metadata_server as string);
  if (metadataProblem) throw new FlagError('--metadata_server', `--metadata_server: ${metadataProblem}`);
  return {
    client: {
      local_hostname: v.local_hostname as string,
      metadata_server: v.metadata_server as string,
      global_segment_size: v.global_segment_size as number,
      local_buffer_size: v.local_buffer_size as number,
      protocol: v.protocol as string,
      device_name: v.device_name as string,
      master_server_address: v.master_server as string,
    },
    host: v.host as string,
    port: v.port as number,
    rpcPort: v.rpc_port as number,
    threads: explicit.has('threads') ? (v.threads as number) : undefined,
    shmDir,
    peerUids,
    shmPeerUids: [...envPeerUids, ...peerUids],
    maxSegmentSize: maxSeg,
    shutdownGraceSeconds: v.shutdown_grace_seconds as number,
    leaseTtlMs: v.default_kv_lease_ttl as number,
    cxl,
    offload: offloadTier(v, explicit, env),
    tls: { cert: v.tls_cert as string, key: v.tls_key as string, ca: v.tls_ca as string },
    values: v,
  };
}

/** The SSD tier: the flags, else STORE_OFFLOAD_DIR / STORE_OFFLOAD_SIZE; a directory needs a size and a size a directory. */
function offloadTier(v: Record<string, FlagValue>, explicit: ReadonlySet<string>, env: Record<string, string | undefined>): { dir: string; size: number } | undefined {
  const dir = (v.offload_dir as string) || env.STORE_OFFLOAD_DIR || '';
  let size = v.offload_size as number;
  if (!explicit.has('offload_size') && env.STORE_OFFLOAD_SIZE)
    size = storeServiceFlags.convert(storeServiceFlags.spec('offload_size')!, env.STORE_OFFLOAD_SIZE, 'STORE_OFFLOAD_SIZE') as number;
  if (dir === '' && size === 0) return undefined;
  if (dir === '') throw new FlagError('--offload_dir', `--offload_size=${size} needs an --offload_dir (a directory on this host's SSD)`);
  if (size <= 0 || size % 4096 !== 0) throw new FlagError('--offload_size', `--offload_dir needs an --offload_size that is a positive multiple of 4096 bytes, got ${size}`);
  return { dir, size };
}

/** The spec's client-side CXL settings: MC_CXL_DEV_PATH (which also enables it) and MC_CXL_DEV_SIZE override the flags. */
function cxlMemory(v: Record<string, FlagValue>, env: Record<string, string | undefined>): { path: string; size: number } | undefined {
  const envPath = env.MC_CXL_DEV_PATH ?? '';
  if (!(v.enable_cxl as boolean) && envPath === '') return undefined;
  const path = envPath || (v.cxl_path as string);
  if (path === '') throw new FlagError('--cxl_path', '--enable_cxl needs a --cxl_path (a DAX device such as /dev/dax0.0, or a file)');
  let size = v.cxl_size as number;
  if (env.MC_CXL_DEV_SIZE) size = storeServiceFlags.convert(storeServiceFlags.spec('cxl_size')!, env.MC_CXL_DEV_SIZE, 'MC_CXL_DEV_SIZE') as number;
  if (size <= 0 || size % 4096 !== 0) throw new FlagError('--cxl_size', `the CXL size must be a positive multiple of 4096 bytes, got ${size}`);
  return { path, size };
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[?::1\]?)$/i;

/** The host part of "host", "host:port", "[v6]:port". */
function hostPart(hostPort: string): string {
  const m = /^\[([^\]]+)\](?::\d+)?$/.exec(hostPort);
  if (m) return m[1];
  const i = hostPort.lastIndexOf(':');
  return i > 0 && hostPort.indexOf(':') === i ? hostPort.slice(0, i) : hostPort;
}

/**
 * A warning when --local_hostname is a loopback name (the default, localhost) while the master is
 * elsewhere: the segment is registered under it, so peers on other hosts could not reach this
 * engine. Undefined when nothing is wrong (a one-host setup, or a real address).
 */
export function loopbackHostNotice(localHostname: string, masterServer: string): string | undefined {
  if (!LOOPBACK.test(hostPart(localHostname))) return undefined;
  const masters = masterServer
    .replace(/^(etcd|redis):\/\//, '')
    .split(/[;,]/)
    .map((m) => hostPart(m.trim()))
    .filter(Boolean);
  if (masters.length === 0 || masters.every((m) => LOOPBACK.test(m))) return undefined;
  return `--local_hostname=${localHostname} is a loopback name, but the master (${masterServer}) is not on this host: segments are registered under it, so peers on other hosts cannot reach this store service; give this host's address (Kubernetes: --local_hostname=$(POD_IP))`;
}
