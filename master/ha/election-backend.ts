// The contract between the election shell and a coordination backend (etcd, Redis, Kubernetes
// Lease). A backend holds one leader record per cluster whose value is the leader's advertised
// RPC address `host:port`; it never decides on its own when to renew: the shell does.

export interface AcquireResult {
  acquired: boolean;
  /** The current holder's advertised address when not acquired (if the backend knows it). */
  leader?: string;
}

export interface ElectionBackend {
  /** Human-readable description for logs, e.g. "etcd 127.0.0.1:2379 key /c/master/leader". */
  readonly description: string;
  /**
   * Takes the leader record if nobody holds it (or it expired), writing `address` with a TTL of
   * `ttlMs`. Resolves {acquired:false} when someone else holds it; rejects on transport errors.
   */
  tryAcquire(address: string, ttlMs: number): Promise<AcquireResult>;
  /** Extends our hold by `ttlMs`. true = still ours; false = definitely lost; rejects = unknown. */
  renew(address: string, ttlMs: number): Promise<boolean>;
  /** Gives the record up if it is still ours (best effort, on shutdown or after deposition). */
  release(address: string): Promise<void>;
  /** The current leader's advertised address, or undefined when there is none (or its claim has run out). */
  readLeader(): Promise<string | undefined>;
  /**
   * Writes a small record beside the leader record (docs/ha.md "Which image may be elected"): with
   * `ttlMs` it disappears unless written again within that time; without, it stays. `name` is
   * [A-Za-z0-9._-], at most 63 characters.
   */
  putRecord(name: string, value: string, ttlMs?: number): Promise<void>;
  /**
   * Writes a record (no TTL) only while this process holds the leader record, checked by the
   * backend as it applies the write (etcd: a transaction on the key's lease; Redis: a script on
   * the key's value; k8s: the leader Lease read just before), so a deposed leader's late write
   * cannot replace its successor's. Rejects when not the holder.
   */
  putLeaderRecord(name: string, value: string): Promise<void>;
  /** Every record that has not expired, by name. */
  readRecords(): Promise<Map<string, string>>;
  /** Side effects of gaining / losing leadership (k8s: the pod's leader label). Best effort. */
  onElected?(): Promise<void>;
  onDeposed?(): Promise<void>;
  /** Closes connections. */
  close(): Promise<void>;
}

/** The prefix of the records (putRecord) in the etcd and Redis backends. */
export function recordsPrefix(clusterId: string): string {
  return `/${clusterId}/master/records/`;
}

/** The leader key used by the etcd and Redis backends and by client-side discovery. */
export function leaderKey(clusterId: string): string {
  return `/${clusterId}/master/leader`;
}
