#!/usr/bin/env node
// Runs the test Kubernetes API server as its own process:
//   node dist/e2e/kube-apiserver/main.js [--port N] [--kubeconfig FILE] [--history N] [--bookmark-interval-ms N]
//   [--statefulset-controller] [--verbose]
// Prints `listening on http://127.0.0.1:PORT` once it serves; SIGTERM/SIGINT stop it.

import { KubeApiServer } from './http-server.js';
import { writeKubeconfig } from './kubeconfig.js';

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const verbose = process.argv.includes('--verbose');
  const server = new KubeApiServer({
    historyLimit: flag('history') ? Number(flag('history')) : undefined,
    bookmarkIntervalMs: flag('bookmark-interval-ms') ? Number(flag('bookmark-interval-ms')) : undefined,
    log: verbose ? (l) => process.stderr.write(`${l}\n`) : undefined,
    statefulSetController: process.argv.includes('--statefulset-controller'),
  });
  const url = await server.start(Number(flag('port') ?? 0));
  const kc = flag('kubeconfig');
  if (kc) writeKubeconfig(kc, url);
  process.stdout.write(`listening on ${url}\n`);
  const stop = () => {
    server.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => {
  process.stderr.write(`kube-apiserver: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
