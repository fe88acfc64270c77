// `npm run bench:transfer` as a user runs it (dist/bench/transfer-bench.js): --help, a wrong
// argument, and that the processes it starts (store_master, store_service, its pump peer,
// redis-server) go with it when its output is closed (`| head`) or when it alone gets SIGINT.
// Run `npm run build` first.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { distRoot } from '../sidecar/local-cluster.js';

const bench = join(distRoot(), 'bench/transfer-bench.js');
const env = { ...process.env, BENCH_SEGMENT_SIZE: '256MB', BENCH_BYTES: String(8 * 1024 * 1024) };

function start(args: string[] = []): ChildProcess {
  return spawn(process.execPath, [bench, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
}

async function finish(p: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  p.stdout!.on('data', (d) => (stdout += d));
  p.stderr!.on('data', (d) => (stderr += d));
  const [code] = (await once(p, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/** Direct children of `pid` now. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    out.push(...readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
  }
  return out;
}

/** Gone, or a zombie left for init to reap: either way no longer running. */
function running(pid: number): boolean {
  if (!existsSync(`/proc/${pid}`)) return false;
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Starts the bench, waits for its first line (everything is up then), returns it and its children. */
async function started(): Promise<{ p: ChildProcess; children: number[]; stderr: () => string }> {
  const p = start();
  let stderr = '';
  p.stderr!.on('data', (d) => (stderr += d));
  const first = await new Promise<string>((resolve, reject) => {
    createInterface({ input: p.stdout! }).once('line', resolve);
    p.once('exit', (c) => reject(new Error(`bench exited (${c}) before its first line: ${stderr}`)));
  });
  expect(first).toMatch(/^transfer bench: master 127\.0\.0\.1:\d+, store_service 127\.0\.0\.1:\d+/);
  return { p, children: childrenOf(p.pid!), stderr: () => stderr };
}

describe('bench:transfer', () => {
  it('prints its usage for --help and refuses other arguments, starting nothing', async () => {
    const help = await finish(start(['--help']));
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: npm run bench:transfer/);
    expect(help.stdout).toMatch(/BENCH_SEGMENT_SIZE/);
    const bad = await finish(start(['--sizes=4k']));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unexpected argument "--sizes=4k"/);
  });

  it('stops what it started when its output is closed', async () => {
    const { p, children } = await started();
    expect(children.length).toBeGreaterThanOrEqual(3); // pump peer, store_master, store_service (+ redis-server)
    const exited = once(p, 'exit');
    p.stdout!.destroy(); // as `| head` does once it has its lines
    const [code] = (await exited) as [number | null];
    expect(code).toBe(1);
    expect(children.filter(running)).toEqual([]);
  });

  it('stops what it started when it alone gets SIGINT', async () => {
    const { p, children, stderr } = await started();
    p.stdout!.resume();
    const exited = once(p, 'exit');
    p.kill('SIGINT'); // to the bench only, not its process group
    const [code] = (await exited) as [number | null];
    expect(code).toBe(130);
    expect(stderr()).toMatch(/SIGINT received; stopping what it started/);
    expect(children.filter(running)).toEqual([]);
  });
});
