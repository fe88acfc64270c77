// Writes a kubeconfig that points kubectl, helm and @kubernetes/client-node at a test API server.

import { writeFileSync } from 'node:fs';

/** The kubeconfig text for `serverUrl`, with `namespace` as the context's default. */
export function kubeconfigYaml(serverUrl: string, namespace = 'default'): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: kvcache-test',
    '  cluster:',
    `    server: ${serverUrl}`,
    // @kubernetes/client-node refuses plain HTTP unless TLS verification is declared skipped.
    '    insecure-skip-tls-verify: true',
    'users:',
    '- name: kvcache-test',
    '  user:',
    '    token: kvcache-test-token',
    'contexts:',
    '- name: kvcache-test',
    '  context:',
    '    cluster: kvcache-test',
    '    user: kvcache-test',
    `    namespace: ${namespace}`,
    'current-context: kvcache-test',
    '',
  ].join('\n');
}

export function writeKubeconfig(path: string, serverUrl: string, namespace = 'default'): string {
  writeFileSync(path, kubeconfigYaml(serverUrl, namespace), { mode: 0o600 });
  return path;
}
