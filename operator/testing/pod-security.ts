// Test support: the checks of the Kubernetes `restricted` Pod Security Standard (the baseline
// checks included) over a pod spec, each violation as a readable line, so tests can assert that
// what the operator renders and injects is admitted in a namespace that enforces it.
import type { V1Container, V1PodSpec, V1SecurityContext } from '@kubernetes/client-node';

const RESTRICTED_VOLUMES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);
const ALLOWED_SECCOMP = new Set(['RuntimeDefault', 'Localhost']);

export function restrictedViolations(spec: V1PodSpec): string[] {
  const out: string[] = [];
  const pod = spec.securityContext ?? {};
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) out.push('host namespaces (hostNetwork, hostPID or hostIPC) are used');
  for (const v of spec.volumes ?? []) {
    const kind = Object.keys(v).find((k) => k !== 'name');
    if (kind === undefined || !RESTRICTED_VOLUMES.has(kind)) out.push(`volume ${v.name} is of type ${kind ?? '(none)'}`);
  }
  if (pod.runAsUser === 0) out.push('the pod runs as uid 0');
  const containers: V1Container[] = [...(spec.initContainers ?? []), ...spec.containers];
  for (const c of containers) {
    const sc: V1SecurityContext = c.securityContext ?? {};
    const where = `container ${c.name}`;
    if (sc.privileged) out.push(`${where} is privileged`);
    if (sc.allowPrivilegeEscalation !== false) out.push(`${where} does not set allowPrivilegeEscalation: false`);
    if (!(sc.runAsNonRoot ?? pod.runAsNonRoot)) out.push(`${where} does not run as non-root (runAsNonRoot)`);
    if (sc.runAsUser === 0) out.push(`${where} runs as uid 0`);
    const seccomp = sc.seccompProfile?.type ?? pod.seccompProfile?.type;
    if (seccomp === undefined || !ALLOWED_SECCOMP.has(seccomp)) out.push(`${where} has no RuntimeDefault or Localhost seccomp profile`);
    if (!sc.capabilities?.drop?.includes('ALL')) out.push(`${where} does not drop ALL capabilities`);
    for (const cap of sc.capabilities?.add ?? []) if (cap !== 'NET_BIND_SERVICE') out.push(`${where} adds capability ${cap}`);
    for (const p of c.ports ?? []) if (p.hostPort) out.push(`${where} uses host port ${p.hostPort}`);
  }
  return out;
}
