// The ClientService schema (proto/store_client.proto): what dummy clients call on a real client.
// Its method table numbers the methods of the dummy-client channel (magic "KVD1") like
// master-proto.ts does for the master's.
import { loadService, type MethodInfo } from './service-proto.js';

const loaded = loadService('store_client.proto', 'store.ClientService');

export const clientMethods: readonly MethodInfo[] = loaded.methods;

export const clientMethodByName: ReadonlyMap<string, MethodInfo> = loaded.byName;

/** The method of ClientService called `name` (throws when there is none: a typo is a bug). */
export function clientMethod(name: string): MethodInfo {
  const m = loaded.byName.get(name);
  if (!m) throw new Error(`ClientService has no method ${name}`);
  return m;
}
