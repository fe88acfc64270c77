// Decoding of Kubernetes protobuf request bodies for the kinds that clients send only as
// protobuf: Secrets, ConfigMaps and DeleteOptions (helm's release storage, `kubectl create
// secret|configmap`).
// A body is the `k8s\0` magic followed by a runtime.Unknown envelope whose `raw` field holds the
// object message; field numbers are those of k8s.io/api's generated.proto. Other kinds get 415.

import protobuf from 'protobufjs';
import { ApiError } from './api-error.js';

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

const str = (id: number) => ({ type: 'string', id });
const descriptor: Record<string, unknown> = {
  nested: {
    TypeMeta: { fields: { apiVersion: str(1), kind: str(2) } },
    Unknown: { fields: { typeMeta: { type: 'TypeMeta', id: 1 }, raw: { type: 'bytes', id: 2 }, contentEncoding: str(3), contentType: str(4) } },
    Time: { fields: { seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } } },
    OwnerReference: {
      fields: { kind: str(1), name: str(3), uid: str(4), apiVersion: str(5), controller: { type: 'bool', id: 6 }, blockOwnerDeletion: { type: 'bool', id: 7 } },
    },
    ObjectMeta: {
      fields: {
        name: str(1),
        generateName: str(2),
        namespace: str(3),
        uid: str(5),
        resourceVersion: str(6),
        generation: { type: 'int64', id: 7 },
        labels: { keyType: 'string', type: 'string', id: 11 },
        annotations: { keyType: 'string', type: 'string', id: 12 },
        ownerReferences: { rule: 'repeated', type: 'OwnerReference', id: 13 },
        finalizers: { rule: 'repeated', type: 'string', id: 14 },
      },
    },
    Secret: {
      fields: {
        metadata: { type: 'ObjectMeta', id: 1 },
        data: { keyType: 'string', type: 'bytes', id: 2 },
        type: str(3),
        stringData: { keyType: 'string', type: 'string', id: 4 },
        immutable: { type: 'bool', id: 5 },
      },
    },
    Preconditions: { fields: { uid: str(1), resourceVersion: str(2) } },
    DeleteOptions: {
      fields: {
        gracePeriodSeconds: { type: 'int64', id: 1 },
        preconditions: { type: 'Preconditions', id: 2 },
        orphanDependents: { type: 'bool', id: 3 },
        propagationPolicy: str(4),
        dryRun: { rule: 'repeated', type: 'string', id: 5 },
      },
    },
    ConfigMap: {
      fields: {
        metadata: { type: 'ObjectMeta', id: 1 },
        data: { keyType: 'string', type: 'string', id: 2 },
        binaryData: { keyType: 'string', type: 'bytes', id: 3 },
        immutable: { type: 'bool', id: 4 },
      },
    },
  },
};
const root = protobuf.Root.fromJSON(descriptor);

type Obj = Record<string, any>;

function dropEmpty(o: Obj): Obj {
  for (const [k, v] of Object.entries(o)) {
    if (v === '' || v === undefined || (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0))
      delete o[k];
  }
  return o;
}

/** Decodes a protobuf body into the JSON form of the object. */
export function decodeProtobufBody(body: Buffer): Obj {
  if (body.length < 4 || !body.subarray(0, 4).equals(MAGIC)) throw new ApiError(400, 'BadRequest', 'protobuf body without the k8s\\0 magic prefix');
  const unknown = root.lookupType('Unknown').toObject(root.lookupType('Unknown').decode(body.subarray(4)), { defaults: false });
  const kind: string = unknown.typeMeta?.kind ?? '';
  if (kind !== 'Secret' && kind !== 'ConfigMap' && kind !== 'DeleteOptions') {
    throw new ApiError(
      415,
      'UnsupportedMediaType',
      `this test API server decodes protobuf only for Secret, ConfigMap and DeleteOptions, not "${kind}"; send JSON (kubectl apply -f / create -f)`,
    );
  }
  const t = root.lookupType(kind);
  const obj = t.toObject(t.decode(unknown.raw ?? new Uint8Array()), { longs: Number, bytes: String, defaults: false });
  const meta = dropEmpty({ ...(obj.metadata ?? {}) });
  if (meta.generation === 0) delete meta.generation;
  return dropEmpty({ ...obj, apiVersion: unknown.typeMeta.apiVersion, kind, metadata: meta });
}
