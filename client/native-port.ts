// The parts of the native addon (native/index.ts) the client uses: mapped memory and the transfer
// engine. Declared here so the client's logic is typed against exactly what it needs.

export interface MappedRegion {
  readonly buffer: ArrayBuffer;
  readonly address: number;
  readonly size: number;
  readonly kind: string;
  readonly fd: number;
  release(): void;
}

export interface MapMemoryOptions {
  size: number;
  kind?: 'memfd' | 'shm' | 'hugetlbfs' | 'file';
  name?: string;
  path?: string;
  create?: boolean;
  offset?: number;
  hugepage?: boolean;
  hugepageSize?: '2MB' | '1GB';
}

export interface EngineTransferOp {
  op: 'read' | 'write';
  endpoint: string;
  remoteAddress: number;
  localAddress: number;
  length: number;
}

export interface TransferEnginePort {
  readonly endpoint: string;
  start(): string;
  registerRegion(address: number, size: number): void;
  unregisterRegion(address: number): void;
  transfer(ops: EngineTransferOp[]): Promise<void>;
  close(): void;
}

export interface TransferEngineOptions {
  host?: string;
  minPort?: number;
  maxPort?: number;
  connectionsPerPeer?: number;
  chunkSize?: number;
  timeoutMs?: number;
  memcpyLocal?: boolean;
}

export interface NativePort {
  mapMemory(opts: MapMemoryOptions): MappedRegion;
  addressOf(view: ArrayBufferView): number;
  /** A fresh Buffer backed by huge pages where possible (large Get results). */
  allocHugeBuffer(size: number): Buffer;
  TransferEngine: new (opts?: TransferEngineOptions) => TransferEnginePort;
  clientPortRange(env?: Record<string, string | undefined>): { min: number; max: number };
}

/** Loads the addon (built by node-gyp); the error says how to build it when it is missing. */
export async function loadNative(): Promise<NativePort> {
  try {
    return (await import('../native/index.js')) as unknown as NativePort;
  } catch (e) {
    throw new Error('the native addon could not be loaded (run `npm run build` / node-gyp rebuild in native/)', { cause: e });
  }
}
