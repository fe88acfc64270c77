// The gRPC face of the master: every MasterService RPC served by grpc-js from the proto-loader
// definition, each handler a call into the dispatcher. Connections arrive through the shared
// RPC port (rpc-listener.ts) by a connection injector, not by a grpc-js bind. Requests are decoded
// by the fast channel's codec (common/proto-codec.ts), not protobufjs: one decoder for both
// transports, whose string fields never turn bytes that are not UTF-8 into a valid key. With a
// cluster secret every call must carry a valid x-kvstore-auth metadata entry (method "POST", the
// full method path, the empty body: common/cluster-secret.ts), else it is answered UNAUTHENTICATED
// before the dispatcher sees it.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { MAX_PAYLOAD_BYTES, MAX_REQUEST_PAYLOAD_BYTES } from '../common/channel-frame.js';
import { NonceCache } from '../common/cluster-secret.js';
import { grpcAuthProblem } from '../common/grpc-auth.js';
import { decodeWith, masterMethodByName, masterProtoPath } from '../common/master-proto.js';
import { MAX_REQUEST_ELEMENTS, packedFieldsOf, requestShapeProblem } from '../common/request-shape.js';
import type { RpcDispatcher } from './rpc-dispatcher.js';

const MALFORMED = Symbol('malformed request');
/** Calls in progress at once on one gRPC connection (the HTTP/2 recommended minimum). */
const MAX_CONCURRENT_STREAMS = 100;

interface Malformed {
  [MALFORMED]: string;
}

/** The cluster secret calls must prove, and where refusals go (counted and logged by the caller). */
export interface GrpcAuth {
  secret: Buffer;
  refused: (peer: string, why: string) => void;
}

export function createGrpcServer(dispatcher: RpcDispatcher, auth?: GrpcAuth): { server: grpc.Server; injector: grpc.ConnectionInjector } {
  const nonces = new NonceCache();
  const def = protoLoader.loadSync(masterProtoPath(), { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true });
  const serviceDef = def['store.MasterService'] as grpc.ServiceDefinition;
  const service: Record<string, grpc.MethodDefinition<object, object>> = {};
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const [name, m] of Object.entries(serviceDef)) {
    const info = masterMethodByName.get(m.originalName ?? name) ?? masterMethodByName.get(name[0].toUpperCase() + name.slice(1));
    if (!info) throw new Error(`gRPC method ${name} missing from the method table`);
    const index = info.index;
    // A request that fails to decode, or would decode into too many objects, becomes
    // INVALID_PARAMS instead of a transport error.
    const codec = info.requestCodec;
    const packed = packedFieldsOf(info.requestCodec);
    service[name] = {
      ...m,
      requestDeserialize: (buf: Buffer) => {
        const problem = requestShapeProblem(buf, MAX_REQUEST_ELEMENTS, packed);
        if (problem !== undefined) return { [MALFORMED]: problem } satisfies Malformed;
        try {
          return decodeWith<object>(codec, buf);
        } catch (e) {
          return { [MALFORMED]: (e as Error).message } satisfies Malformed;
        }
      },
    };
    const path = m.path;
    handlers[name] = (call: grpc.ServerUnaryCall<object, object>, callback: grpc.sendUnaryData<object>) => {
      if (auth) {
        const problem = grpcAuthProblem(auth.secret, nonces, call.metadata, path);
        if (problem !== undefined) {
          auth.refused(call.getPeer(), problem);
          callback({ code: grpc.status.UNAUTHENTICATED, details: problem });
          return;
        }
      }
      const req = call.request;
      const res = MALFORMED in req ? dispatcher.invalid(index, 'grpc', (req as Malformed)[MALFORMED]) : dispatcher.serve(index, req, 'grpc');
      if (res instanceof Promise) void res.then((r) => callback(null, r));
      else callback(null, res);
    };
  }
  // Requests are held to the fast channel's request limit; a reply over the frame limit fails
  // that call with RESOURCE_EXHAUSTED (grpc-js checks before sending) and the server goes on.
  // Calls in progress per connection are capped (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); the
  // bytes of requests still arriving are bounded by the RPC listener (rpc-listener.ts).
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_REQUEST_PAYLOAD_BYTES,
    'grpc.max_send_message_length': MAX_PAYLOAD_BYTES,
    'grpc.max_concurrent_streams': MAX_CONCURRENT_STREAMS,
  });
  server.addService(service, handlers);
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  return { server, injector };
}
