// The MasterService schema loaded at runtime with protobufjs from proto/store_master.proto: the
// method table (index = declaration order, the method number of the fast channel) and the
// encode/decode pair that yields objects shaped like the generated __Output types.
import protobuf from 'protobufjs';
import { decodeWith, encodeWith, type MessageCodec } from './proto-codec.js';
import { loadService, protoPath, type MethodInfo } from './service-proto.js';

export type { MethodInfo } from './service-proto.js';

/** Finds proto/store_master.proto from both the sources and dist/. */
export function masterProtoPath(): string {
  return protoPath('store_master.proto');
}

// The same conversion as @grpc/proto-loader's {longs: Number, enums: Number, defaults: true, oneofs: true}.
const toObjectOptions: protobuf.IConversionOptions = { longs: Number, enums: Number, defaults: true, arrays: true, objects: true, oneofs: true };

const loaded = loadService('store_master.proto', 'store.MasterService');
const root = loaded.root;
const codecFor = loaded.codecFor;

export const masterMethods: readonly MethodInfo[] = loaded.methods;

export const masterMethodByName: ReadonlyMap<string, MethodInfo> = loaded.byName;

/** Encodes a plain object (or __Output object) of `type`. */
export function encodeMessage(type: protobuf.Type, obj: object): Uint8Array {
  return type.encode(obj).finish();
}

/** Decodes bytes of `type` into a plain object with every field present (the __Output shape). */
export function decodeMessage<T>(type: protobuf.Type, bytes: Uint8Array): T {
  return type.toObject(type.decode(bytes), toObjectOptions) as T;
}

export function lookupType(name: string): protobuf.Type {
  return root.lookupType(`store.${name}`);
}

/** The compiled codec of any message type of the schema (e.g. "ReplicaInfo"). */
export function codecOf(name: string): MessageCodec {
  return codecFor(lookupType(name));
}

export { decodeWith, encodeWith, type MessageCodec };
