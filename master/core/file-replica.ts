// The read reply of an object held only by the file tier (docs/tiers.md "File tier"): one replica
// of type DISK with no handles and `file` {path, size}, the slices' checksums from the file's
// header as the writer recorded them (the reader checks the file against them), and the read
// lease TTL (the file is not pinned by it: a removal unlinks the name, and an open file stays
// readable on Linux). A plain message: the fast channel's generic codec writes it.
import { ErrorCode } from '../../common/error-code.js';
import type { GetReplicaListResponse__Output } from '../../proto/gen/store/GetReplicaListResponse.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { ReplicaType } from '../../proto/gen/store/ReplicaType.js';
import type { FileEntry } from './file-index.js';

export function fileReplicaReply(file: FileEntry, leaseTtlMs: number): GetReplicaListResponse__Output {
  return {
    status_code: ErrorCode.OK,
    replica_list: [fileReplica(file)],
    lease_ttl_ms: leaseTtlMs,
    slice_checksums: file.checksums,
    version: 0, // files carry no version (readers check them against these checksums)
  };
}

/** An object's file as a replica: DISK, complete, no handles, `file` {path, size} (listings show it beside the object's other replicas). */
export function fileReplica(file: FileEntry): ReplicaInfo__Output {
  return { handles: [], status: ReplicaStatus.COMPLETE, replica_type: ReplicaType.DISK, file: { path: file.name, size: file.size } };
}
