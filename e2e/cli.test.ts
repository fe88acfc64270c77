// End to end for the `store` CLI (dist/cli/main.js) run as a process against a real store_master
// and a real store_service (LocalCluster, free ports): put/get byte-equal through files and
// stdin/stdout, stat, ls with a regex, rm then get -> exit 1, segments, health (and a dead address
// -> exit 3), mount/unmount through the store service's REST API, top --once, --json documents
// that parse, usage errors -> 2, the progress bar on a terminal only. Run `npm run build` first.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { distRoot, LocalCluster, track, type ProcessHandle, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { freePort } from './free-port.js';

const CLI = join(distRoot(), 'cli', 'main.js');
const MiB = 1024 * 1024;
let cluster: LocalCluster;
let svc: StoreServiceProcess;
let env: NodeJS.ProcessEnv;
let dir: string;

interface Run {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** Runs the CLI with `args`, feeding `input` on stdin; resolves when it exits. */
function run(args: string[], opts: { input?: Buffer | string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CLI, ...args], { env: opts.env ?? env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    p.stdout.on('data', (d: Buffer) => out.push(d));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr: err }));
    p.stdin.end(opts.input ?? '');
  });
}

/** Runs and expects exit 0, returning stdout as text. */
async function ok(args: string[], opts: { input?: Buffer | string } = {}): Promise<string> {
  const r = await run(args, opts);
  if (r.code !== 0) throw new Error(`store ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  expect(r.stderr).toBe('');
  return r.stdout.toString();
}

/** A failure: the exit code and exactly one line on stderr naming the command, no stack. */
async function fails(args: string[], code: number, pattern: RegExp, opts: { env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<Run> {
  const r = await run(args, opts);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code, stderr: expect.stringMatching(pattern) });
  expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  return r;
}

beforeAll(async () => {
  // A short read lease: `rm` right after a `get` waits for it to end.
  cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '64MB', masterArgs: ['--default_kv_lease_ttl=300ms'] });
  svc = cluster.services[0];
  env = {
    ...process.env,
    STORE_MASTER_ADDRESS: cluster.master.rpc,
    STORE_MASTER_HTTP_ADDRESS: `http://${cluster.master.metrics}`,
    STORE_SERVICE_HTTP_ADDRESS: '',
    STORE_METADATA_SERVER: '',
  };
  dir = mkdtempSync(join(tmpdir(), 'store-cli-'));
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe('put and get', () => {
  it('puts a file and gets it back byte-equal, to a file and to stdout', async () => {
    const value = randomBytes(3 * MiB + 17);
    const src = join(dir, 'in.bin');
    writeFileSync(src, value);
    expect(await ok(['put', 'cli/file', src])).toBe('');
    const dst = join(dir, 'out.bin');
    expect(await ok(['get', 'cli/file', dst])).toBe('');
    expect(readFileSync(dst).equals(value)).toBe(true);
    const r = await run(['get', 'cli/file']);
    expect(r.code).toBe(0);
    expect(r.stdout.equals(value)).toBe(true);
    const viaDash = await run(['get', 'cli/file', '-']);
    expect(viaDash.stdout.equals(value)).toBe(true);
  });

  it('puts from stdin', async () => {
    const value = randomBytes(1 * MiB + 5);
    const doc = JSON.parse(await ok(['put', 'cli/stdin', '-', '--json'], { input: value })) as unknown;
    expect(doc).toEqual({ key: 'cli/stdin', size: value.length, replicas: 1, upsert: false });
    expect((await run(['get', 'cli/stdin'])).stdout.equals(value)).toBe(true);
    const got = JSON.parse(await ok(['get', 'cli/stdin', join(dir, 'stdin.bin'), '--json'])) as unknown;
    expect(got).toEqual({ key: 'cli/stdin', size: value.length, file: join(dir, 'stdin.bin') });
  });

  it('get holds the value once: the client buffer is sized for it, nothing is staged', async () => {
    // Over TCP (no shared pages of the service in the count), peak RSS of a 40 MiB get against a
    // 4 KiB one: one copy of the value is ~40 MiB more; a staged get held two (~80 MiB).
    const value = randomBytes(40 * MiB);
    writeFileSync(join(dir, 'once.bin'), value);
    await ok(['put', 'cli/once', join(dir, 'once.bin')]);
    await ok(['put', 'cli/once-small', '-'], { input: 'x'.repeat(4096) });
    const tcp = { ...env, MC_STORE_SHM_TRANSPORT: '0', STORE_CLI_VERBOSE: '1' };
    const peak = async (key: string): Promise<number> => {
      const r = await run(['get', key, join(dir, `${key.replace('/', '_')}.out`)], { env: tcp });
      expect(r.code).toBe(0);
      return Number(/store: peak RSS (\d+) bytes/.exec(r.stderr)![1]);
    };
    const extra = (await peak('cli/once')) - (await peak('cli/once-small'));
    expect(readFileSync(join(dir, 'cli_once.out')).equals(value)).toBe(true);
    // A staged get holds the value twice (~80 MiB more). No lower bound: the small get's own peak
    // varies with when the collector ran (seen 13-23 MiB apart on a loaded machine).
    expect(extra).toBeLessThan(60 * MiB);
  });

  it('refuses to overwrite (exit 4) unless --upsert', async () => {
    await ok(['put', 'cli/twice', '-'], { input: 'one' });
    await fails(['put', 'cli/twice', '-'], 4, /^store put: .*OBJECT_ALREADY_EXISTS/, { input: 'again' });
    await ok(['put', 'cli/twice', '-', '--upsert'], { input: 'two!' });
    expect((await run(['get', 'cli/twice'])).stdout.toString()).toBe('two!');
  });

  it('a missing key is exit 1, a missing input file exit 5, an empty value exit 2', async () => {
    await fails(['get', 'cli/absent'], 1, /^store get: .*OBJECT_NOT_FOUND/);
    await fails(['put', 'cli/x', join(dir, 'no-such-file')], 5, /^store put: cannot read .*no-such-file: ENOENT/);
    await fails(['put', 'cli/x', '-'], 2, /^store put: stdin is empty/);
  });
});

describe('stat, ls, rm', () => {
  beforeAll(async () => {
    for (const k of ['cli/ls/a', 'cli/ls/b', 'cli/other']) await ok(['put', k, '-'], { input: `value of ${k}` });
  });

  it('stat shows size and the replica on the store service segment', async () => {
    const doc = JSON.parse(await ok(['stat', 'cli/ls/a', '--json'])) as {
      size: number;
      state: string;
      replicas: { slices: { segment: string; endpoint: string; size: number }[] }[];
    };
    expect(doc).toMatchObject({ size: 'value of cli/ls/a'.length, state: 'complete' });
    expect(doc.replicas).toHaveLength(1);
    expect(doc.replicas[0].slices).toEqual([expect.objectContaining({ segment: svc.segment, endpoint: svc.endpoint, size: 17 })]);
    const text = await ok(['stat', 'cli/ls/a']);
    expect(text).toMatch(/^size +17 B \(17 bytes\)$/m);
    expect(text).toContain(svc.segment);
    await fails(['stat', 'cli/none'], 1, /^store stat: master \/query_key: key not found: cli\/none/);
  });

  it('ls lists the keys matching a regex', async () => {
    expect((await ok(['ls', '^cli/ls/'])).split('\n').filter(Boolean).sort()).toEqual(['cli/ls/a', 'cli/ls/b']);
    expect(JSON.parse(await ok(['ls', '^cli/ls/', '--json']))).toEqual({ keys: expect.arrayContaining(['cli/ls/a', 'cli/ls/b']), count: 2 });
    expect(JSON.parse(await ok(['ls', '^nothing-matches$', '--json']))).toEqual({ keys: [], count: 0 });
    const all = (await ok(['ls'])).split('\n');
    expect(all).toEqual(expect.arrayContaining(['cli/ls/a', 'cli/ls/b', 'cli/other']));
    await fails(['ls', '('], 2, /^store ls: REGEX "\(": Invalid regular expression/);
  });

  it('rm removes (waiting for a read lease), then get is exit 1', async () => {
    await ok(['get', 'cli/other', join(dir, 'other.bin')]); // takes a read lease
    expect(JSON.parse(await ok(['rm', 'cli/other', '--json']))).toEqual({ key: 'cli/other', removed: true });
    await fails(['get', 'cli/other'], 1, /OBJECT_NOT_FOUND/);
    await fails(['rm', 'cli/other'], 1, /^store rm: remove "cli\/other": OBJECT_NOT_FOUND/);
    expect((await ok(['ls', '^cli/other$'])).trim()).toBe('');
  });
});

describe('segments and health', () => {
  it("segments lists the master's segments", async () => {
    const doc = JSON.parse(await ok(['segments', '--json'])) as { segments: Record<string, unknown>[] };
    expect(doc.segments).toContainEqual(expect.objectContaining({ name: svc.segment, size: 64 * MiB, endpoint: svc.endpoint, state: 'MOUNTED', used: expect.any(Number) }));
    const text = await ok(['segments']);
    expect(text).toMatch(/^NAME +SIZE +USED +USE +ENDPOINT +STATE$/m);
    expect(text).toMatch(new RegExp(`^${svc.segment.replace(/\./g, '\\.')} +64\\.00 MB`, 'm'));
  });

  it('health: 0 and a report when the master serves', async () => {
    const text = await ok(['health']);
    expect(text).toMatch(/^rpc +ok \(view_version \d+\)$/m);
    expect(text).toMatch(/^healthy$/m);
    const doc = JSON.parse(await ok(['health', '--json'])) as Record<string, unknown>;
    expect(doc).toMatchObject({ healthy: true, master: cluster.master.rpc, leader: cluster.master.rpc, rpc: { ok: true }, http: { ok: true }, segments: 1 });
  });

  it('health against a dead address: exit 3, still a JSON report', async () => {
    const port = await freePort();
    const dead = { ...env, STORE_MASTER_ADDRESS: `127.0.0.1:${port}`, STORE_MASTER_HTTP_ADDRESS: `http://127.0.0.1:${port}` };
    const r = await fails(['health', '--json'], 3, /^store health: master 127\.0\.0\.1:\d+ is not healthy/, { env: dead });
    expect(JSON.parse(r.stdout.toString())).toMatchObject({ healthy: false, rpc: { ok: false, error: expect.stringMatching(/ECONNREFUSED/) }, http: { ok: false } });
    await fails(['put', 'k', '-'], 3, /^store put: .*127\.0\.0\.1:\d+/, { env: dead, input: 'v' });
    await fails(['segments'], 3, /^store segments: cannot reach the master at http:\/\/127\.0\.0\.1:\d+/, { env: dead });
  });
});

describe('mount and unmount through the store service', () => {
  it('mounts memory as a segment the master sees, and unmounts it', async () => {
    const service = `http://${svc.http}`;
    const doc = JSON.parse(await ok(['mount', '8MB', '--service', service, '--location', 'cli-test', '--json'])) as {
      segment_ids: string[];
      allocated_size: number;
      segments: { id: string; name: string }[];
    };
    expect(doc).toMatchObject({ allocated_size: 8 * MiB, segment_ids: [expect.any(String)] });
    const [id] = doc.segment_ids;
    const name = doc.segments[0].name;
    expect(name).toMatch(new RegExp(`^${svc.endpoint}/\\d+$`));
    expect((await cluster.admin('/get_all_segments')).split('\n')).toContain(name);
    expect(await ok(['unmount', id, '--service', service])).toBe('unmounted 1 segment(s)\n');
    expect((await cluster.admin('/get_all_segments')).split('\n')).not.toContain(name);
    await fails(['unmount', id, '--service', service], 1, /^store unmount: no segment .* \(nothing was unmounted\)/);
  });

  it('the service address comes from STORE_SERVICE_HTTP_ADDRESS; a dead one is exit 3', async () => {
    const doc = JSON.parse((await run(['mount', '4MB', '--json'], { env: { ...env, STORE_SERVICE_HTTP_ADDRESS: svc.http } })).stdout.toString()) as { segment_ids: string[] };
    expect(await ok(['unmount', doc.segment_ids[0], '--service', svc.http, '--grace', '0'])).toMatch(/unmounted 1/);
    const port = await freePort();
    await fails(['mount', '4MB', '--service', `127.0.0.1:${port}`], 3, /^store mount: cannot reach the store service at http:\/\/127\.0\.0\.1:\d+/);
    await fails(['mount', '4MB', '--service', svc.http, '--offset', '4096'], 2, /--offset applies to --shm mounts only/);
  });
});

describe('top', () => {
  it('--once prints one frame with rates; --json one document', async () => {
    await ok(['put', 'cli/top', '-', '--upsert'], { input: 'top' });
    const text = await ok(['top', '--once', '--interval', '200ms']);
    expect(text).toMatch(/^store top {2}http:\/\/\S+ {2}\S+Z {2}\(rates over 0\.\d s\)$/m);
    expect(text).toMatch(/^segments +1 /m);
    expect(text).toMatch(/^rates +puts\/s \S+ +gets\/s \S+ +hit rate \S+/m);
    const doc = JSON.parse(await ok(['top', '--json', '--interval', '200ms'])) as { objects: number; segments: number; capacity_bytes: number; rates: Record<string, unknown> };
    expect(doc.segments).toBe(1);
    expect(doc.capacity_bytes).toBe(64 * MiB);
    expect(doc.objects).toBeGreaterThanOrEqual(1);
    expect(doc.rates).toEqual(expect.objectContaining({ puts_per_s: expect.any(Number), gets_per_s: expect.any(Number), rpc_per_s: expect.any(Number) }));
  });
});

describe('top on a terminal', () => {
  it('redraws frames in place until q', async () => {
    const cmd = [process.execPath, CLI, 'top', '--interval', '200ms'].map((a) => `'${a}'`).join(' ');
    const p = spawn('script', ['-qec', cmd, '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    const exited = new Promise<number | null>((r) => p.once('exit', (code) => r(code)));
    await new Promise<void>((resolve) => {
      p.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        // the second frame has rates: from two scrapes
        if (/rates over/.test(out)) resolve();
      });
    });
    p.stdin.write('q');
    expect(await exited).toBe(0);
    expect(out).toContain('\x1b[H\x1b[2J'); // each frame clears the screen first
    expect(out).toMatch(/rates +\(after the next scrape\)/); // the first frame
    expect(out).toContain('(q to quit)');
  });
});

describe('usage', () => {
  it('usage errors are exit 2 with one line', async () => {
    await fails(['frob'], 2, /^store: unknown command "frob"/);
    await fails(['get'], 2, /^store: missing argument: store get KEY/);
    await fails(['ls', '--bogus'], 2, /^store: .*bogus/);
    await fails(['put', 'k', '-', '--replicas', 'two'], 2, /^store put: --replicas "two": expected a whole number/);
    await fails(['get', 'bad\u0001key'], 2, /^store get: KEY "bad\\u0001key": .*control character/);
    await fails(['get', 'cli/file', '--json'], 2, /--json prints its document on stdout/);
    await fails(['mount', 'lots'], 2, /^store mount: SIZE "lots"/);
    await fails(['health'], 2, /no master address: give --master/, { env: { ...env, STORE_MASTER_ADDRESS: '' } });
    await fails(['health', '--master', 'zk://x:1'], 2, /unknown scheme/);
  });

  it('--help for the tool and every command, exit 0', async () => {
    expect(await ok(['--help'])).toMatch(/^Usage: store COMMAND/);
    for (const c of ['put', 'get', 'rm', 'ls', 'stat', 'segments', 'health', 'mount', 'unmount', 'top']) expect(await ok([c, '--help'])).toContain(`Usage: store ${c}`);
  });
});

describe('progress bar', () => {
  it('is drawn on a terminal for a large value, and never on a pipe', async () => {
    const value = randomBytes(12 * MiB);
    const src = join(dir, 'big.bin');
    writeFileSync(src, value);
    // on a pipe (every run above too): nothing on stderr
    expect((await run(['put', 'cli/big-pipe', src])).stderr).toBe('');
    // on a terminal: util-linux script(1) gives the CLI a pseudo-terminal
    const cmd = [process.execPath, CLI, 'put', 'cli/big-tty', src].map((a) => `'${a}'`).join(' ');
    const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { env, encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/reading +\[#+\] 100%/);
    expect(r.stdout).toMatch(/storing +\[#+\] 100%/);
    expect((await run(['get', 'cli/big-tty'])).stdout.equals(value)).toBe(true);
  });
});

const haveRedis = spawnSync('sh', ['-c', 'command -v redis-server']).status === 0;
(haveRedis ? describe : describe.skip)(`HA address forms${haveRedis ? '' : ' (skipped: no redis-server binary; apt-get install redis-server)'}`, () => {
  const procs: ProcessHandle[] = [];
  let redisUrl = '';
  let master = { rpc: '', http: '' };
  let haDir = '';

  beforeAll(async () => {
    haDir = mkdtempSync(join(tmpdir(), 'store-cli-ha-'));
    const port = await freePort();
    redisUrl = `redis://127.0.0.1:${port}`;
    const redis = track(
      'redis',
      spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', haDir], { stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    procs.push(redis);
    await redis.waitFor(/Ready to accept connections/);
    const args = [
      '--enable_ha=true',
      '--ha_backend_type=redis',
      `--ha_backend_connstring=${redisUrl}`,
      '--cluster_id=cli_ha',
      '--rpc_address=127.0.0.1',
      '--rpc_port=0',
      '--metrics_port=0',
    ];
    const m = track('ha-master', spawn(process.execPath, [join(distRoot(), 'master', 'main.js'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
    procs.push(m);
    const ready = await m.waitFor(/store_master listening: rpc=(\S+) metrics=(\S+)/);
    master = { rpc: ready[1], http: `http://${ready[2]}` };
    await m.waitFor(/HA: elected leader/);
  }, 30_000);

  afterAll(async () => {
    for (const p of procs.reverse()) {
      if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGTERM');
      await p.exited;
    }
    if (haDir) rmSync(haDir, { recursive: true, force: true });
  }, 30_000);

  it('health resolves the leader through redis://host:port/cluster', async () => {
    const haEnv = { ...env, STORE_MASTER_ADDRESS: `${redisUrl}/cli_ha`, STORE_MASTER_HTTP_ADDRESS: master.http };
    const r = await run(['health', '--json'], { env: haEnv });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout.toString())).toMatchObject({ healthy: true, master: `${redisUrl}/cli_ha`, leader: master.rpc, ha_role: 'leader' });
    // another cluster id names no leader: unreachable
    const none = await run(['health'], { env: { ...haEnv, STORE_MASTER_ADDRESS: `${redisUrl}/no_such_cluster` } });
    expect(none.code).toBe(3);
    expect(none.stdout.toString()).toMatch(/no master leader elected yet/);
  });
});
