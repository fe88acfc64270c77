// The MasterService schema loaded at runtime with protobufjs from proto/store_master.proto: the
// method table (index = declaration order, the method number of the fast channel) and the
// encode/decode pair that yields objects shaped like the generated __Output types.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { compileCodecs, decodeWith, encodeWith, type MessageCodec } from './proto-codec.js';

/** Finds proto/store_master.proto from both the sources and dist/. */
export function masterProtoPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const p = join(dir, 'proto', 'store_master.proto');
    if (existsSync(p)) return p;
    dir = dirname(dir);
  }
  throw new Error('proto/store_master.proto not found above ' + fileURLToPath(import.meta.url));
}

export interface MethodInfo {
  /** Position in the service declaration: the method number on the fast channel. */
  index: number;
  /** RPC name as in the proto, e.g. "GetReplicaList". */
  name: string;
  /** The camelCase name of the MasterCore and MasterClient method, e.g. "getReplicaList". */
  call: string;
  requestType: protobuf.Type;
  responseType: protobuf.Type;
  /** Compiled codecs (proto-codec.ts) used by the fast channel. */
  requestCodec: MessageCodec;
  responseCodec: MessageCodec;
}

// The same conversion as @grpc/proto-loader's {longs: Number, enums: Number, defaults: true, oneofs: true}.
const toObjectOptions: protobuf.IConversionOptions = { longs: Number, enums: Number, defaults: true, arrays: true, objects: true, oneofs: true };

const root = new protobuf.Root().loadSync(masterProtoPath(), { keepCase: true });
const service = root.lookupService('store.MasterService');

for (const m of service.methodsArray) m.resolve();
const codecFor = compileCodecs(service.methodsArray.flatMap((m) => [m.resolvedRequestType as protobuf.Type, m.resolvedResponseType as protobuf.Type]));

export const masterMethods: readonly MethodInfo[] = service.methodsArray.map((m, index) => ({
  index,
  name: m.name,
  call: m.name[0].toLowerCase() + m.name.slice(1),
  requestType: m.resolvedRequestType as protobuf.Type,
  responseType: m.resolvedResponseType as protobuf.Type,
  requestCodec: codecFor(m.resolvedRequestType as protobuf.Type),
  responseCodec: codecFor(m.resolvedResponseType as protobuf.Type),
}));

export const masterMethodByName: ReadonlyMap<string, MethodInfo> = new Map(masterMethods.map((m) => [m.name, m]));

/** Encodes a plain object (or __Output object) of `type`. */
export function encodeMessage(type: protobuf.Type, obj: object): Uint8Array {
  return type.encode(obj as protobuf.Message).finish();
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
