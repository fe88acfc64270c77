// The security contexts of the pods the operator renders and the sidecar it injects: the
// Kubernetes `restricted` Pod Security Standard (non-root uid 1000 as the image's USER, no
// privilege escalation, every capability dropped, the runtime's default seccomp profile), so they
// run in namespaces that enforce it. The one exception is a StoreSegment of kind `dax`: its memory
// is a host character device, reachable only from a privileged container (device cgroup access),
// so that pod needs the `privileged` standard.
import type { V1PodSecurityContext, V1SecurityContext } from '@kubernetes/client-node';

export const STORE_UID = 1000;

/** Pod level: every container as uid/gid 1000, volumes group-owned by it, default seccomp. */
export function restrictedPod(): V1PodSecurityContext {
  return { runAsNonRoot: true, runAsUser: STORE_UID, runAsGroup: STORE_UID, fsGroup: STORE_UID, seccompProfile: { type: 'RuntimeDefault' } };
}

/**
 * Container level, complete on its own (the injected sidecar joins pods whose pod-level context
 * is the user's).
 */
export function restrictedContainer(): V1SecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: STORE_UID,
    runAsGroup: STORE_UID,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/** A dax segment's container: device access needs privilege (the `privileged` standard). */
export function daxContainer(): V1SecurityContext {
  return { privileged: true };
}
