// spec.tls of a StoreCluster in the pods: the Secret it names (tls.crt, tls.key, ca.crt, as
// cert-manager writes them) mounted read-only, the servers' --tls_* flags, the clients'
// STORE_TLS_* env, and probes that still work: HTTPS GET (the kubelet does not verify the
// certificate) or, with client certificates required, a TCP check (the kubelet has none to show).
import type { V1EnvVar, V1Probe, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { TLS_DIR, TLS_VOLUME } from '../api/constants.js';
import type { DefaultedStoreCluster } from '../api/defaults.js';

export type ClusterTls = NonNullable<DefaultedStoreCluster['spec']['tls']>;

export function tlsVolume(tls: ClusterTls, mode: number): V1Volume {
  return { name: TLS_VOLUME, secret: { secretName: tls.secretName, defaultMode: mode } };
}

export function tlsMount(): V1VolumeMount {
  return { name: TLS_VOLUME, mountPath: TLS_DIR, readOnly: true };
}

/** store_master/store_service flags. */
export function tlsServerArgs(tls: ClusterTls): string[] {
  return [`--tls_cert=${TLS_DIR}/tls.crt`, `--tls_key=${TLS_DIR}/tls.key`, ...(tls.clientCertificates ? [`--tls_ca=${TLS_DIR}/ca.crt`] : [])];
}

/** What a client of the control interfaces reads (common/tls-fetch.ts). */
export function tlsClientEnv(tls: ClusterTls): V1EnvVar[] {
  return [
    { name: 'STORE_TLS_CA_FILE', value: `${TLS_DIR}/ca.crt` },
    ...(tls.clientCertificates
      ? [
          { name: 'STORE_TLS_CERT_FILE', value: `${TLS_DIR}/tls.crt` },
          { name: 'STORE_TLS_KEY_FILE', value: `${TLS_DIR}/tls.key` },
        ]
      : []),
  ];
}

/** `probe` as it must be under `tls`: unchanged without TLS. */
export function tlsProbe(probe: V1Probe, tls: ClusterTls | undefined): V1Probe {
  if (!tls || !probe.httpGet) return probe;
  const { httpGet, ...rest } = probe;
  if (tls.clientCertificates) return { ...rest, tcpSocket: { port: httpGet.port } };
  return { ...rest, httpGet: { ...httpGet, scheme: 'HTTPS' } };
}
