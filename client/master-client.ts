// MasterClient: the client side of the master RPC, over the fast multiplexed channel (one TCP
// connection, many calls in flight). One async method per MasterService RPC: request objects in,
// __Output-shaped responses out (status_code included; a failed status is not thrown). Transport
// failures reject with the typed errors of master-channel-errors.ts; after a dropped connection the
// next call reconnects.
import type { BatchExistKeyRequest } from '../proto/gen/store/BatchExistKeyRequest.js';
import type { BatchExistKeyResponse__Output } from '../proto/gen/store/BatchExistKeyResponse.js';
import type { BatchGetReplicaListRequest } from '../proto/gen/store/BatchGetReplicaListRequest.js';
import type { BatchGetReplicaListResponse__Output } from '../proto/gen/store/BatchGetReplicaListResponse.js';
import type { BatchKeysRequest } from '../proto/gen/store/BatchKeysRequest.js';
import type { BatchKeysResponse__Output } from '../proto/gen/store/BatchKeysResponse.js';
import type { BatchPutStartRequest } from '../proto/gen/store/BatchPutStartRequest.js';
import type { BatchPutStartResponse__Output } from '../proto/gen/store/BatchPutStartResponse.js';
import type { BatchQueryIpRequest } from '../proto/gen/store/BatchQueryIpRequest.js';
import type { BatchQueryIpResponse__Output } from '../proto/gen/store/BatchQueryIpResponse.js';
import type { BatchReplicaClearRequest } from '../proto/gen/store/BatchReplicaClearRequest.js';
import type { BatchReplicaClearResponse__Output } from '../proto/gen/store/BatchReplicaClearResponse.js';
import type { BatchUpsertStartRequest } from '../proto/gen/store/BatchUpsertStartRequest.js';
import type { BatchUpsertStartResponse__Output } from '../proto/gen/store/BatchUpsertStartResponse.js';
import type { ExistKeyRequest } from '../proto/gen/store/ExistKeyRequest.js';
import type { ExistKeyResponse__Output } from '../proto/gen/store/ExistKeyResponse.js';
import type { GetReplicaListByRegexRequest } from '../proto/gen/store/GetReplicaListByRegexRequest.js';
import type { GetReplicaListByRegexResponse__Output } from '../proto/gen/store/GetReplicaListByRegexResponse.js';
import type { GetReplicaListRequest } from '../proto/gen/store/GetReplicaListRequest.js';
import type { GetReplicaListResponse__Output } from '../proto/gen/store/GetReplicaListResponse.js';
import type { MountSegmentRequest } from '../proto/gen/store/MountSegmentRequest.js';
import type { MountSegmentResponse__Output } from '../proto/gen/store/MountSegmentResponse.js';
import type { PingRequest } from '../proto/gen/store/PingRequest.js';
import type { PingResponse__Output } from '../proto/gen/store/PingResponse.js';
import type { PutEndRequest } from '../proto/gen/store/PutEndRequest.js';
import type { PutEndResponse__Output } from '../proto/gen/store/PutEndResponse.js';
import type { PutRevokeRequest } from '../proto/gen/store/PutRevokeRequest.js';
import type { PutRevokeResponse__Output } from '../proto/gen/store/PutRevokeResponse.js';
import type { PutStartRequest } from '../proto/gen/store/PutStartRequest.js';
import type { PutStartResponse__Output } from '../proto/gen/store/PutStartResponse.js';
import type { BatchReplicaCopiedRequest } from '../proto/gen/store/BatchReplicaCopiedRequest.js';
import type { BatchReplicaCopiedResponse__Output } from '../proto/gen/store/BatchReplicaCopiedResponse.js';
import type { ReplicaCopiedRequest } from '../proto/gen/store/ReplicaCopiedRequest.js';
import type { CreateCopyTaskRequest } from '../proto/gen/store/CreateCopyTaskRequest.js';
import type { CreateCopyTaskResponse__Output } from '../proto/gen/store/CreateCopyTaskResponse.js';
import type { CreateMoveTaskRequest } from '../proto/gen/store/CreateMoveTaskRequest.js';
import type { CreateMoveTaskResponse__Output } from '../proto/gen/store/CreateMoveTaskResponse.js';
import type { QueryTaskRequest } from '../proto/gen/store/QueryTaskRequest.js';
import type { QueryTaskResponse__Output } from '../proto/gen/store/QueryTaskResponse.js';
import type { ReplicaCopiedResponse__Output } from '../proto/gen/store/ReplicaCopiedResponse.js';
import type { RemoveAllRequest } from '../proto/gen/store/RemoveAllRequest.js';
import type { RemoveAllResponse__Output } from '../proto/gen/store/RemoveAllResponse.js';
import type { RemoveByRegexRequest } from '../proto/gen/store/RemoveByRegexRequest.js';
import type { RemoveByRegexResponse__Output } from '../proto/gen/store/RemoveByRegexResponse.js';
import type { RemoveRequest } from '../proto/gen/store/RemoveRequest.js';
import type { RemoveResponse__Output } from '../proto/gen/store/RemoveResponse.js';
import type { UnmountSegmentRequest } from '../proto/gen/store/UnmountSegmentRequest.js';
import type { UnmountSegmentResponse__Output } from '../proto/gen/store/UnmountSegmentResponse.js';
import type { UpsertEndRequest } from '../proto/gen/store/UpsertEndRequest.js';
import type { UpsertEndResponse__Output } from '../proto/gen/store/UpsertEndResponse.js';
import type { UpsertRevokeRequest } from '../proto/gen/store/UpsertRevokeRequest.js';
import type { UpsertRevokeResponse__Output } from '../proto/gen/store/UpsertRevokeResponse.js';
import type { UpsertStartRequest } from '../proto/gen/store/UpsertStartRequest.js';
import type { UpsertStartResponse__Output } from '../proto/gen/store/UpsertStartResponse.js';
import { masterMethodByName, type MethodInfo } from '../common/master-proto.js';
import { parseHostPort } from '../common/host-port.js';
import { MasterChannel, type MasterChannelOptions } from './master-channel.js';
import { MasterClientClosedError } from './master-channel-errors.js';

export * from './master-channel-errors.js';
export type MasterClientOptions = MasterChannelOptions;

function method(name: string): MethodInfo {
  const m = masterMethodByName.get(name);
  if (!m) throw new Error(`MasterService has no method ${name}`);
  return m;
}

/** Items per call of a batch RPC: well under the master's MAX_REQUEST_ELEMENTS (common/request-shape.ts). */
export const BATCH_CHUNK = 16_384;

const M = {
  Ping: method('Ping'),
  MountSegment: method('MountSegment'),
  UnmountSegment: method('UnmountSegment'),
  ExistKey: method('ExistKey'),
  BatchExistKey: method('BatchExistKey'),
  GetReplicaList: method('GetReplicaList'),
  BatchGetReplicaList: method('BatchGetReplicaList'),
  GetReplicaListByRegex: method('GetReplicaListByRegex'),
  PutStart: method('PutStart'),
  BatchPutStart: method('BatchPutStart'),
  PutEnd: method('PutEnd'),
  BatchPutEnd: method('BatchPutEnd'),
  PutRevoke: method('PutRevoke'),
  BatchPutRevoke: method('BatchPutRevoke'),
  UpsertStart: method('UpsertStart'),
  BatchUpsertStart: method('BatchUpsertStart'),
  UpsertEnd: method('UpsertEnd'),
  BatchUpsertEnd: method('BatchUpsertEnd'),
  UpsertRevoke: method('UpsertRevoke'),
  BatchUpsertRevoke: method('BatchUpsertRevoke'),
  Remove: method('Remove'),
  RemoveByRegex: method('RemoveByRegex'),
  RemoveAll: method('RemoveAll'),
  BatchQueryIp: method('BatchQueryIp'),
  BatchReplicaClear: method('BatchReplicaClear'),
  ReplicaCopied: method('ReplicaCopied'),
  CreateCopyTask: method('CreateCopyTask'),
  CreateMoveTask: method('CreateMoveTask'),
  QueryTask: method('QueryTask'),
  BatchReplicaCopied: method('BatchReplicaCopied'),
};

/** The index of Ping: a NOTICE frame naming it asks the client to ping now (copies wait). */
export const PING_METHOD = M.Ping.index;

export class MasterClient {
  private channel: MasterChannel;
  private reconnecting: Promise<MasterChannel> | undefined;
  private closed = false;

  private constructor(
    readonly address: string,
    channel: MasterChannel,
    private readonly opts: MasterClientOptions,
  ) {
    this.channel = channel;
  }

  /** Connects to a master at "host:port"; rejects with MasterConnectionError if unreachable. */
  static async connect(address: string, opts: MasterClientOptions = {}): Promise<MasterClient> {
    parseHostPort(address, 'master address');
    return new MasterClient(address, await MasterChannel.connect(address, opts), opts);
  }

  /** Calls in flight on the current connection. */
  get inFlight(): number {
    return this.channel.inFlight;
  }

  /** True while the current connection is open (an idle timeout or a master restart closes it;
   *  the next call then reconnects). */
  get connected(): boolean {
    return !this.channel.closed;
  }

  /** Resolves once the current connection has closed (at once if it already has). */
  disconnected(): Promise<void> {
    if (this.channel.closed) return Promise.resolve();
    const ch = this.channel;
    return new Promise((resolve) => {
      const previous = ch.onClose;
      ch.onClose = (err) => {
        previous?.(err);
        resolve();
      };
    });
  }

  /** Generic call by RPC name (e.g. "GetReplicaList"); the typed methods below are preferred. */
  callByName<Res>(name: string, req: object): Promise<Res> {
    return this.call<Res>(method(name), req);
  }

  /**
   * A batch RPC whose list field (`keys` or `requests`) may be longer than the master takes in
   * one request (MAX_REQUEST_ELEMENTS): sent as calls of at most BATCH_CHUNK items, in order on
   * this connection (so a key listed twice still meets itself in order), results joined. A
   * whole-request failure of any call is the answer.
   */
  private batchCall<Res extends { status_code: number; results: unknown[] }>(m: MethodInfo, req: object, field: 'keys' | 'requests'): Promise<Res> {
    const items = (req as Record<string, unknown>)[field];
    if (!Array.isArray(items) || items.length <= BATCH_CHUNK) return this.call<Res>(m, req);
    const calls: Promise<Res>[] = [];
    for (let i = 0; i < items.length; i += BATCH_CHUNK) calls.push(this.call<Res>(m, { ...req, [field]: items.slice(i, i + BATCH_CHUNK) }));
    return Promise.all(calls).then((rs) => rs.find((r) => r.status_code !== 0) ?? { ...rs[0], results: rs.flatMap((r) => r.results) });
  }

  private call<Res>(m: MethodInfo, req: object): Promise<Res> {
    if (!this.channel.closed) return this.channel.call<Res>(m, req);
    if (this.closed) return Promise.reject(new MasterClientClosedError(`client of master ${this.address} closed`, this.address, m.name));
    this.reconnecting ??= MasterChannel.connect(this.address, this.opts).finally(() => {
      this.reconnecting = undefined;
    });
    return this.reconnecting.then((ch) => {
      if (this.closed) {
        ch.close();
        throw new MasterClientClosedError(`client of master ${this.address} closed`, this.address, m.name);
      }
      if (this.channel !== ch && this.channel.closed) this.channel = ch;
      return this.channel.call<Res>(m, req);
    });
  }

  /** Closes the connection; calls in flight reject with MasterClientClosedError. */
  close(): void {
    this.closed = true;
    this.channel.close();
  }

  ping(req: PingRequest): Promise<PingResponse__Output> {
    return this.call(M.Ping, req);
  }

  mountSegment(req: MountSegmentRequest): Promise<MountSegmentResponse__Output> {
    return this.call(M.MountSegment, req);
  }

  unmountSegment(req: UnmountSegmentRequest): Promise<UnmountSegmentResponse__Output> {
    return this.call(M.UnmountSegment, req);
  }

  existKey(req: ExistKeyRequest): Promise<ExistKeyResponse__Output> {
    return this.call(M.ExistKey, req);
  }

  batchExistKey(req: BatchExistKeyRequest): Promise<BatchExistKeyResponse__Output> {
    return this.batchCall(M.BatchExistKey, req, 'keys');
  }

  getReplicaList(req: GetReplicaListRequest): Promise<GetReplicaListResponse__Output> {
    return this.call(M.GetReplicaList, req);
  }

  batchGetReplicaList(req: BatchGetReplicaListRequest): Promise<BatchGetReplicaListResponse__Output> {
    return this.batchCall(M.BatchGetReplicaList, req, 'keys');
  }

  getReplicaListByRegex(req: GetReplicaListByRegexRequest): Promise<GetReplicaListByRegexResponse__Output> {
    return this.call(M.GetReplicaListByRegex, req);
  }

  putStart(req: PutStartRequest): Promise<PutStartResponse__Output> {
    return this.call(M.PutStart, req);
  }

  batchPutStart(req: BatchPutStartRequest): Promise<BatchPutStartResponse__Output> {
    return this.batchCall(M.BatchPutStart, req, 'requests');
  }

  putEnd(req: PutEndRequest): Promise<PutEndResponse__Output> {
    return this.call(M.PutEnd, req);
  }

  batchPutEnd(req: BatchKeysRequest): Promise<BatchKeysResponse__Output> {
    return this.batchCall(M.BatchPutEnd, req, 'keys');
  }

  putRevoke(req: PutRevokeRequest): Promise<PutRevokeResponse__Output> {
    return this.call(M.PutRevoke, req);
  }

  batchPutRevoke(req: BatchKeysRequest): Promise<BatchKeysResponse__Output> {
    return this.batchCall(M.BatchPutRevoke, req, 'keys');
  }

  upsertStart(req: UpsertStartRequest): Promise<UpsertStartResponse__Output> {
    return this.call(M.UpsertStart, req);
  }

  batchUpsertStart(req: BatchUpsertStartRequest): Promise<BatchUpsertStartResponse__Output> {
    return this.batchCall(M.BatchUpsertStart, req, 'requests');
  }

  upsertEnd(req: UpsertEndRequest): Promise<UpsertEndResponse__Output> {
    return this.call(M.UpsertEnd, req);
  }

  batchUpsertEnd(req: BatchKeysRequest): Promise<BatchKeysResponse__Output> {
    return this.batchCall(M.BatchUpsertEnd, req, 'keys');
  }

  upsertRevoke(req: UpsertRevokeRequest): Promise<UpsertRevokeResponse__Output> {
    return this.call(M.UpsertRevoke, req);
  }

  batchUpsertRevoke(req: BatchKeysRequest): Promise<BatchKeysResponse__Output> {
    return this.batchCall(M.BatchUpsertRevoke, req, 'keys');
  }

  remove(req: RemoveRequest): Promise<RemoveResponse__Output> {
    return this.call(M.Remove, req);
  }

  removeByRegex(req: RemoveByRegexRequest): Promise<RemoveByRegexResponse__Output> {
    return this.call(M.RemoveByRegex, req);
  }

  removeAll(req: RemoveAllRequest): Promise<RemoveAllResponse__Output> {
    return this.call(M.RemoveAll, req);
  }

  batchQueryIp(req: BatchQueryIpRequest): Promise<BatchQueryIpResponse__Output> {
    return this.call(M.BatchQueryIp, req);
  }

  batchReplicaClear(req: BatchReplicaClearRequest): Promise<BatchReplicaClearResponse__Output> {
    return this.call(M.BatchReplicaClear, req);
  }

  replicaCopied(req: ReplicaCopiedRequest): Promise<ReplicaCopiedResponse__Output> {
    return this.call(M.ReplicaCopied, req);
  }

  /** Many copy reports in one call; a master without it refuses the method (MasterProtocolError). */
  batchReplicaCopied(req: BatchReplicaCopiedRequest): Promise<BatchReplicaCopiedResponse__Output> {
    return this.call(M.BatchReplicaCopied, req);
  }

  createCopyTask(req: CreateCopyTaskRequest): Promise<CreateCopyTaskResponse__Output> {
    return this.call(M.CreateCopyTask, req);
  }

  createMoveTask(req: CreateMoveTaskRequest): Promise<CreateMoveTaskResponse__Output> {
    return this.call(M.CreateMoveTask, req);
  }

  queryTask(req: QueryTaskRequest): Promise<QueryTaskResponse__Output> {
    return this.call(M.QueryTask, req);
  }
}
