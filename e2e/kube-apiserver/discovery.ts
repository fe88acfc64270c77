// Discovery documents, enough for kubectl and @kubernetes/client-node: /version, /api (APIVersions),
// /api/v1 and /apis/<group>/<version> (APIResourceList with verbs, scope, kind, short names,
// categories and subresources), /apis (APIGroupList). Aggregated discovery is not served, so
// clients fall back to these legacy documents.

import type { ResourceRegistry, ResourceType } from './resource-registry.js';

type Obj = Record<string, any>;

export function versionInfo(): Obj {
  return {
    major: '1',
    minor: '33',
    gitVersion: 'v1.33.0-kvcache-test',
    gitCommit: '0000000000000000000000000000000000000000',
    gitTreeState: 'clean',
    buildDate: '2026-01-01T00:00:00Z',
    goVersion: 'go1.24.0',
    compiler: 'gc',
    platform: 'linux/amd64',
  };
}

export function coreVersions(addr: string): Obj {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: addr }] };
}

function preferredVersion(reg: ResourceRegistry, group: string, versions: string[]): string {
  const storage = reg.all().find((t) => t.group === group)?.versions[0];
  return storage && versions.includes(storage) ? storage : versions[0];
}

export function groupList(reg: ResourceRegistry): Obj {
  const groups = [...reg.groups().entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, versions]) => {
      const pv = preferredVersion(reg, name, versions);
      return {
        name,
        versions: versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
        preferredVersion: { groupVersion: `${name}/${pv}`, version: pv },
      };
    });
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

export function group(reg: ResourceRegistry, name: string): Obj | undefined {
  const versions = reg.groups().get(name);
  if (!versions) return undefined;
  const pv = preferredVersion(reg, name, versions);
  return {
    kind: 'APIGroup',
    apiVersion: 'v1',
    name,
    versions: versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
    preferredVersion: { groupVersion: `${name}/${pv}`, version: pv },
  };
}

function resourceEntry(t: ResourceType): Obj {
  const e: Obj = {
    name: t.plural,
    singularName: t.singular,
    namespaced: t.namespaced,
    kind: t.kind,
    verbs: t.verbs,
  };
  if (t.shortNames.length > 0) e.shortNames = t.shortNames;
  if (t.categories.length > 0) e.categories = t.categories;
  return e;
}

/** APIResourceList of one group version, or undefined when it is not served. */
export function resourceList(reg: ResourceRegistry, groupName: string, version: string): Obj | undefined {
  const types = reg.all().filter((t) => t.group === groupName && t.version === version);
  if (types.length === 0) return undefined;
  const resources: Obj[] = [];
  for (const t of types.sort((a, b) => a.plural.localeCompare(b.plural))) {
    resources.push(resourceEntry(t));
    if (t.hasStatus) resources.push({ name: `${t.plural}/status`, singularName: '', namespaced: t.namespaced, kind: t.kind, verbs: ['get', 'patch', 'update'] });
    if (t.scale)
      resources.push({
        name: `${t.plural}/scale`,
        singularName: '',
        namespaced: t.namespaced,
        group: 'autoscaling',
        version: 'v1',
        kind: 'Scale',
        verbs: ['get', 'patch', 'update'],
      });
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: groupName ? `${groupName}/${version}` : version, resources };
}
