// The server as its own process (dist/e2e/kube-apiserver/main.js): prints its URL, writes the
// kubeconfig, serves, and exits cleanly on SIGTERM.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';

const main = fileURLToPath(new URL('../../dist/e2e/kube-apiserver/main.js', import.meta.url));

test('runs as a child process with a kubeconfig and stops on SIGTERM', async () => {
  if (!existsSync(main)) throw new Error(`${main} is missing: run \`npm run build\` first`);
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kas-main-')), 'kubeconfig');
  const child = spawn(process.execPath, [main, '--kubeconfig', kubeconfig, '--history', '50'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`exited with ${code}: ${out}`)));
  });
  const kc = yaml.load(readFileSync(kubeconfig, 'utf8')) as any;
  expect(kc.clusters[0].cluster.server).toBe(url);
  expect((await (await fetch(`${url}/api/v1/namespaces/default`)).json()).status.phase).toBe('Active');
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
});
