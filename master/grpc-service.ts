// The gRPC face of the master: every MasterService RPC served by grpc-js from the proto-loader
// definition, each handler a call into the dispatcher. Connections arrive through the shared
// RPC port (rpc-listener.ts) by a connection injector, not by a grpc-js bind.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { masterMethodByName, masterProtoPath } from '../common/master-proto.js';
import type { RpcDispatcher } from './rpc-dispatcher.js';

const MALFORMED = Symbol('malformed request');

interface Malformed {
  [MALFORMED]: string;
}

export function createGrpcServer(dispatcher: RpcDispatcher): { server: grpc.Server; injector: grpc.ConnectionInjector } {
  const def = protoLoader.loadSync(masterProtoPath(), { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true });
  const serviceDef = def['store.MasterService'] as grpc.ServiceDefinition;
  const service: Record<string, grpc.MethodDefinition<object, object>> = {};
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const [name, m] of Object.entries(serviceDef)) {
    const info = masterMethodByName.get(m.originalName ?? name) ?? masterMethodByName.get(name[0].toUpperCase() + name.slice(1));
    if (!info) throw new Error(`gRPC method ${name} missing from the method table`);
    const index = info.index;
    // A request that fails to decode becomes INVALID_PARAMS instead of a transport error.
    const deserialize = m.requestDeserialize;
    service[name] = {
      ...m,
      requestDeserialize: (buf: Buffer) => {
        try {
          return deserialize(buf);
        } catch (e) {
          return { [MALFORMED]: (e as Error).message } satisfies Malformed;
        }
      },
    };
    handlers[name] = (call: grpc.ServerUnaryCall<object, object>, callback: grpc.sendUnaryData<object>) => {
      const req = call.request as object;
      const res = MALFORMED in req ? dispatcher.invalid(index, 'grpc', (req as Malformed)[MALFORMED]) : dispatcher.invoke(index, req, 'grpc');
      callback(null, res);
    };
  }
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
  server.addService(service as grpc.ServiceDefinition, handlers);
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  return { server, injector };
}
