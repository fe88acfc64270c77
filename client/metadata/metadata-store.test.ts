// Every metadata backend publishes, finds and removes a segment descriptor against a real server:
// an HTTP server speaking the master's /metadata protocol, etcd and redis-server started here.
import { spawn, type ChildProcess, execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { openMetadataStore } from './open-metadata-store.js';
import type { MetadataStore, SegmentDescriptor } from './metadata-store.js';
import { parseEtcdAddress } from './etcd-metadata.js';
import { freePort } from '../../e2e/free-port.js';

const desc: SegmentDescriptor = { te_endpoint: '127.0.0.1:12345', protocol: 'tcp', buffer: 140000000000, size: 1 << 30 };

function hasBinary(name: string): boolean {
  try {
    execFileSync('which', [name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Resolves when the process prints `pattern` (stdout or stderr); rejects if it exits first. */
function awaitLine(proc: ChildProcess, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (d: Buffer) => {
      seen += d.toString();
      if (pattern.test(seen)) resolve();
    };
    proc.stdout?.on('data', onData);
    proc.stderr?.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`process exited (${code}) before ready: ${seen.slice(-500)}`)));
  });
}

async function roundTrip(store: MetadataStore, name: string) {
  expect(await store.lookup(name)).toBeNull();
  await store.publish(name, desc);
  expect(await store.lookup(name)).toEqual(desc);
  await store.remove(name);
  expect(await store.lookup(name)).toBeNull();
}

describe('metadata address forms', () => {
  it('picks the backend from the address and rejects anything else', async () => {
    expect(openMetadataStore('P2PHANDSHAKE').kind).toBe('p2p');
    expect(openMetadataStore('http://127.0.0.1:1/metadata').kind).toBe('http');
    expect(() => openMetadataStore('zookeeper://x:1')).toThrow(/invalid metadata_server/);
    expect(parseEtcdAddress('etcd://a:1;b:2')).toEqual(['http://a:1', 'http://b:2']);
    expect(() => parseEtcdAddress('etcd://a')).toThrow(/host:port/);
  });

  it('P2PHANDSHAKE resolves a segment name as its own endpoint and insists on it', async () => {
    const p2p = openMetadataStore('P2PHANDSHAKE');
    expect(await p2p.lookup('10.0.0.2:13001')).toMatchObject({ te_endpoint: '10.0.0.2:13001' });
    await expect(p2p.lookup('not-an-endpoint')).rejects.toThrow(/host:port/);
    await expect(p2p.publish('other:1', desc)).rejects.toThrow(/must be the engine endpoint/);
  });

  it('P2PHANDSHAKE takes "<endpoint>/<suffix>" names for a client\'s further segments', async () => {
    const p2p = openMetadataStore('P2PHANDSHAKE');
    expect(await p2p.lookup('10.0.0.2:13001/3')).toMatchObject({ te_endpoint: '10.0.0.2:13001' });
    await expect(p2p.publish(`${desc.te_endpoint}/1`, desc)).resolves.toBeUndefined();
    await expect(p2p.publish(`${desc.te_endpoint}x/1`, desc)).rejects.toThrow(/must be the engine endpoint/);
    await expect(p2p.lookup('not-an-endpoint/1')).rejects.toThrow(/host:port/);
  });
});

describe('HTTP metadata server backend', () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    // The master's embedded server protocol: GET/PUT/DELETE /metadata?key=K, 404 for unknown keys.
    const kv = new Map<string, string>();
    server = createServer((req, res) => {
      const u = new URL(req.url!, 'http://x');
      const key = u.searchParams.get('key');
      if (u.pathname !== '/metadata' || !key) return void res.writeHead(400).end('bad request');
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        if (req.method === 'PUT') {
          kv.set(key, body);
          res.writeHead(200).end('OK');
        } else if (req.method === 'DELETE') res.writeHead(kv.delete(key) ? 200 : 404).end();
        else if (kv.has(key)) res.writeHead(200).end(kv.get(key));
        else res.writeHead(404).end('not found');
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/metadata`;
  });
  afterAll(() => server.close());

  it('publishes, finds and removes a segment', async () => {
    await roundTrip(openMetadataStore(url), 'node-a:13001');
  });

  it('reports an unreachable server clearly', async () => {
    const dead = openMetadataStore(`http://127.0.0.1:${await freePort()}/metadata`);
    await expect(dead.publish('x:1', desc)).rejects.toThrow(/unreachable/);
  });
});

/** `it`, or a skip that says why when the server binary is missing. */
const itWith = (binary: string, pkg: string): jest.It =>
  hasBinary(binary)
    ? it
    : (((name: string, fn?: jest.ProvidesCallback, timeout?: number) => it.skip(`${name} (skipped: no ${binary} on PATH; apt-get install ${pkg})`, fn, timeout)) as jest.It);

const etcdIt = itWith('etcd', 'etcd-server');
describe('etcd backend (real etcd)', () => {
  let proc: ChildProcess | undefined;
  let dir = '';
  let address = '';
  beforeAll(async () => {
    if (!hasBinary('etcd')) return;
    dir = mkdtempSync(join(tmpdir(), 'etcd-meta-'));
    const [client, peer] = [await freePort(), await freePort()];
    proc = spawn(
      'etcd',
      [
        '--name',
        'm',
        '--data-dir',
        dir,
        '--listen-client-urls',
        `http://127.0.0.1:${client}`,
        '--advertise-client-urls',
        `http://127.0.0.1:${client}`,
        '--listen-peer-urls',
        `http://127.0.0.1:${peer}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${peer}`,
        '--initial-cluster',
        `m=http://127.0.0.1:${peer}`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    await awaitLine(proc, /ready to serve client requests/);
    address = `etcd://127.0.0.1:${client}`;
  });
  afterAll(async () => {
    if (proc && proc.exitCode === null) {
      proc.kill('SIGTERM');
      await once(proc, 'exit');
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  etcdIt('publishes, finds and removes a segment (skipped when the etcd binary is absent)', async () => {
    const store = openMetadataStore(address);
    try {
      await roundTrip(store, 'node-b:13002');
    } finally {
      await store.close();
    }
  });
});

const redisIt = itWith('redis-server', 'redis-server');
describe('Redis backend (real redis-server)', () => {
  let proc: ChildProcess | undefined;
  let address = '';
  beforeAll(async () => {
    if (!hasBinary('redis-server')) return;
    const port = await freePort();
    proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await awaitLine(proc, /Ready to accept connections/);
    address = `redis://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    if (proc && proc.exitCode === null) {
      proc.kill('SIGTERM');
      await once(proc, 'exit');
    }
  });

  redisIt('publishes, finds and removes a segment (skipped when the redis-server binary is absent)', async () => {
    const store = openMetadataStore(address);
    try {
      await roundTrip(store, 'node-c:13003');
    } finally {
      await store.close();
    }
  });
});
