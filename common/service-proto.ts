// A protobuf service loaded at runtime with protobufjs: its method table (index = declaration
// order, the method number on the fast channels) with compiled codecs whose decoded objects have
// the shape of the generated __Output types. The master's MasterService (master-proto.ts) and the
// real client's ClientService (client-proto.ts) are both loaded through here.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { compileCodecs, type MessageCodec } from './proto-codec.js';

/** Finds proto/<file> from both the sources and dist/. */
export function protoPath(file: string): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const p = join(dir, 'proto', file);
    if (existsSync(p)) return p;
    dir = dirname(dir);
  }
  throw new Error(`proto/${file} not found above ${fileURLToPath(import.meta.url)}`);
}

export interface MethodInfo {
  /** Position in the service declaration: the method number on the fast channel. */
  index: number;
  /** RPC name as in the proto, e.g. "GetReplicaList". */
  name: string;
  /** The camelCase name of the method implementing it, e.g. "getReplicaList". */
  call: string;
  requestType: protobuf.Type;
  responseType: protobuf.Type;
  /** Compiled codecs (proto-codec.ts) used by the fast channels. */
  requestCodec: MessageCodec;
  responseCodec: MessageCodec;
}

export interface LoadedService {
  root: protobuf.Root;
  methods: readonly MethodInfo[];
  byName: ReadonlyMap<string, MethodInfo>;
  /** The compiled codec of any message type of the schema. */
  codecFor(type: protobuf.Type): MessageCodec;
}

/** Loads `file` (and what it imports) and compiles the codecs of `service`'s messages. */
export function loadService(file: string, service: string): LoadedService {
  const root = new protobuf.Root().loadSync(protoPath(file), { keepCase: true });
  const svc = root.lookupService(service);
  for (const m of svc.methodsArray) m.resolve();
  const codecFor = compileCodecs(svc.methodsArray.flatMap((m) => [m.resolvedRequestType as protobuf.Type, m.resolvedResponseType as protobuf.Type]));
  const methods: MethodInfo[] = svc.methodsArray.map((m, index) => ({
    index,
    name: m.name,
    call: m.name[0].toLowerCase() + m.name.slice(1),
    requestType: m.resolvedRequestType as protobuf.Type,
    responseType: m.resolvedResponseType as protobuf.Type,
    requestCodec: codecFor(m.resolvedRequestType as protobuf.Type),
    responseCodec: codecFor(m.resolvedResponseType as protobuf.Type),
  }));
  return { root, methods, byName: new Map(methods.map((m) => [m.name, m])), codecFor };
}
