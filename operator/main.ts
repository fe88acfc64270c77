#!/usr/bin/env node
// store-operator: `run` (default) reconciles StoreClusters/StoreSegments and serves the sidecar
// injection webhook; `render -f FILE` and `inject -f POD` show offline what it would create or
// how it would mutate a pod. Bad input: a readable message and exit code 2.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_IMAGE } from './api/constants.js';
import { CliError } from './cli/cli-error.js';
import type { Source } from './cli/offline.js';

const USAGE = `usage:
  store-operator [run] [--namespace=NS] [--image=IMAGE] [--leader-elect=true|false]
                 [--lease-name=NAME] [--lease-namespace=NS] [--identity=ID] [--health-port=8081]
                 [--webhook-port=9443 | --webhook=false] [--cert-dir=DIR] [--webhook-service=NAME]
                 [--webhook-secret=NAME] [--webhook-config=NAME] [--master-url-template=URL]
                 [--segment-stats=true|false] [--resync=SECONDS]
  store-operator render -f FILE|DIR [-f ...] [--cluster-file=FILE] [--image=IMAGE] [--namespace=NS]
  store-operator inject -f POD_FILE|DIR [-f ...] [--cluster-file=FILE] [--image=IMAGE] [--namespace=NS]
  (-f may repeat; a directory means its *.yaml, *.yml and *.json files; - is stdin. A StoreSegment's
  or a pod's StoreCluster comes from the -f inputs or from --cluster-file.)
`;

const KNOWN = new Set([
  'f',
  'filename',
  'namespace',
  'image',
  'leader-elect',
  'lease-name',
  'lease-namespace',
  'identity',
  'health-port',
  'webhook',
  'webhook-port',
  'cert-dir',
  'webhook-service',
  'webhook-secret',
  'webhook-config',
  'master-url-template',
  'segment-stats',
  'resync',
  'cluster-file',
  'help',
  'h',
]);

function parseArgs(argv: string[]): { command: string; flags: Map<string, string>; files: string[] } {
  const flags = new Map<string, string>();
  const files: string[] = [];
  let command = 'run';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('-')) {
      if (i === 0 && ['run', 'render', 'inject', 'help'].includes(a)) {
        command = a;
        continue;
      }
      throw new CliError(`unexpected argument "${a}"`);
    }
    const m = /^--?([^=]+)(?:=(.*))?$/.exec(a)!;
    const name = m[1];
    if (!KNOWN.has(name)) throw new CliError(`unknown flag --${name}`);
    let value = m[2];
    if (value === undefined) {
      if (['help', 'h'].includes(name)) value = 'true';
      else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) value = argv[++i];
      else throw new CliError(`flag --${name} needs a value`);
    }
    if (name === 'f' || name === 'filename') files.push(value);
    else flags.set(name, value);
  }
  return { command, flags, files };
}

function bool(flags: Map<string, string>, name: string, dflt: boolean): boolean {
  const v = flags.get(name);
  if (v === undefined) return dflt;
  if (v === 'true' || v === 'false') return v === 'true';
  throw new CliError(`--${name} must be true or false, got "${v}"`);
}

function int(flags: Map<string, string>, name: string, dflt: number, min = 0, max = 65535): number {
  const v = flags.get(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new CliError(`--${name} must be an integer from ${min} to ${max}, got "${v}"`);
  return n;
}

function readInput(path: string): string {
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
}

/** Every -f input as text: files as given, directories as their manifest files in name order (as kubectl does). */
function readInputs(paths: string[], what: string): Source[] {
  if (paths.length === 0) throw new CliError(`${what}: -f FILE is required`);
  const out: Source[] = [];
  for (const path of paths) {
    let dir = false;
    try {
      dir = path !== '-' && statSync(path).isDirectory();
    } catch {
      // not there: readInput says so
    }
    if (!dir) {
      out.push({ file: path, text: readInput(path) });
      continue;
    }
    const names = readdirSync(path)
      .filter((n) => /\.(ya?ml|json)$/.test(n))
      .sort();
    if (names.length === 0) throw new CliError(`${path}: a directory without *.yaml, *.yml or *.json files`);
    for (const n of names) out.push({ file: join(path, n), text: readInput(join(path, n)) });
  }
  return out;
}

async function main(): Promise<void> {
  const { command, flags, files } = parseArgs(process.argv.slice(2));
  if (command === 'help' || flags.has('help') || flags.has('h')) {
    process.stdout.write(USAGE);
    return;
  }
  const defaults = { image: flags.get('image') ?? process.env.STORE_IMAGE ?? DEFAULT_IMAGE, namespace: flags.get('namespace') ?? 'default' };
  const clusterFile = flags.get('cluster-file');
  const context = clusterFile ? readInputs([clusterFile], '--cluster-file') : [];
  // Loaded on use: they need the operator's optional dependencies (CEL, JSON patch, Kubernetes client).
  const { injectCommand, renderCommand } = await import('./cli/offline.js');
  const { loadCrdSchemas } = await import('./api/crd-schema.js');
  if (command === 'render') {
    process.stdout.write(renderCommand(readInputs(files, 'render'), context, defaults, loadCrdSchemas()));
    return;
  }
  if (command === 'inject') {
    process.stdout.write(injectCommand(readInputs(files, 'inject'), context, defaults, loadCrdSchemas()));
    return;
  }
  const webhook = bool(flags, 'webhook', true);
  // Loaded only here: the offline commands need no Kubernetes client.
  const { defaultIdentity, run } = await import('./cli/run.js');
  await run({
    defaults,
    watchNamespace: flags.get('namespace'),
    leaderElect: bool(flags, 'leader-elect', true),
    leaseName: flags.get('lease-name') ?? 'store-operator',
    leaseNamespace: flags.get('lease-namespace') ?? process.env.POD_NAMESPACE ?? flags.get('namespace') ?? 'default',
    identity: flags.get('identity') ?? defaultIdentity(),
    healthPort: int(flags, 'health-port', 8081),
    webhookPort: webhook ? int(flags, 'webhook-port', 9443) : undefined,
    certDir: flags.get('cert-dir'),
    webhookService: flags.get('webhook-service') ?? 'store-operator-webhook',
    webhookSecret: flags.get('webhook-secret') ?? 'store-operator-webhook-tls',
    webhookConfig: flags.get('webhook-config') ?? 'store-operator',
    masterUrlTemplate: flags.get('master-url-template'),
    segmentStats: bool(flags, 'segment-stats', true),
    resyncMs: int(flags, 'resync', 300, 1, 86400) * 1000,
  });
}

main().catch((e: Error) => {
  if (e instanceof CliError) {
    process.stderr.write(`store-operator: ${e.message}\n`);
    if (/unknown flag|unexpected argument|needs a value/.test(e.message)) process.stderr.write(USAGE);
    process.exit(2);
  }
  const missing = /Cannot find (?:package|module) '([^']+)'/.exec(e.message)?.[1];
  if ((e as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && missing && !missing.startsWith('/')) {
    process.stderr.write(`store-operator: the package ${missing} is missing: the operator needs the optional dependencies of kvcache-store (install it without --omit=optional)\n`);
    process.exit(1);
  }
  process.stderr.write(`store-operator: ${e.stack ?? e.message}\n`);
  process.exit(1);
});
