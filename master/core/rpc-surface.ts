// The master's RPC surface as a type derived from proto/store_master.proto (the handler types
// proto-loader generates): for each `rpc Name(Req) returns (Res)` the core has `name(req, now)`
// taking the decoded request and answering the response. The dispatcher still reaches methods by
// the proto's names at run time; this type makes the compiler check, for every rpc the proto
// declares, that MasterCore (and the HA gate in front of it) has it with the right request and
// reply, so an rpc added to the proto without a core method, or a method whose shape drifted,
// fails the build.
import type { handleUnaryCall } from '@grpc/grpc-js';
import type { MasterServiceHandlers } from '../../proto/gen/store/MasterService.js';

type Rpcs = { [K in keyof MasterServiceHandlers as K extends string ? (string extends K ? never : K) : never]: MasterServiceHandlers[K] };
type RequestOf<H> = H extends handleUnaryCall<infer Q, unknown> ? Q : never;
type ReplyOf<H> = H extends handleUnaryCall<never, infer R> ? R : never;

/** `ping(req, now)` for `rpc Ping`, and so on for every rpc of MasterService. */
export type MasterRpcSurface = {
  [K in keyof Rpcs as Uncapitalize<K & string>]: (req: RequestOf<Rpcs[K]>, now: number) => ReplyOf<Rpcs[K]>;
};
