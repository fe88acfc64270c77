// Where `store-operator run` finds its API server, decided before anything connects: KUBECONFIG
// (every file must be readable and valid), else the in-cluster service account, else
// ~/.kube/config. Nothing found, or a config without a current cluster, is one clear CliError
// (exit 2): the client library would otherwise fall back to localhost:8080 and retry forever, or
// print a stack trace for a bad file.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { CliError } from './offline.js';

const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

export function loadKubeConfig(env: NodeJS.ProcessEnv = process.env, home = homedir()): KubeConfig {
  const kc = new KubeConfig();
  const configured = env.KUBECONFIG?.split(delimiter).filter((p) => p !== '') ?? [];
  let source: string;
  if (configured.length > 0) {
    for (const path of configured) if (!existsSync(path)) throw new CliError(`KUBECONFIG names ${path}, which does not exist`);
    source = `KUBECONFIG=${env.KUBECONFIG}`;
    load(() => (configured.length === 1 ? kc.loadFromFile(configured[0]) : kc.loadFromDefault()), source);
  } else if (env.KUBERNETES_SERVICE_HOST && existsSync(SERVICE_ACCOUNT_TOKEN)) {
    source = 'the in-cluster service account';
    load(() => kc.loadFromCluster(), source);
  } else if (existsSync(join(home, '.kube', 'config'))) {
    source = join(home, '.kube', 'config');
    load(() => kc.loadFromFile(source), source);
  } else {
    throw new CliError('no Kubernetes API server configured: run in a cluster, set KUBECONFIG or create ~/.kube/config (render and inject work offline without one)');
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster?.server) throw new CliError(`${source}: no current context with a cluster server (kubectl config use-context NAME)`);
  return kc;
}

function load(fn: () => void, source: string): void {
  try {
    fn();
  } catch (e) {
    throw new CliError(`${source}: not a usable kubeconfig: ${(e as Error).message.split('\n')[0]}`);
  }
}
