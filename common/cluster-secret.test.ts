import { mkdtempSync, rmSync, statSync, writeFileSync, readFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AuthError,
  clientHandshake,
  HandshakeRefused,
  HandshakeTimeout,
  NonceCache,
  readSecretFile,
  SecretFileError,
  serverAuthSetting,
  serverHandshake,
  signCall,
  verifyCall,
  writeNewSecret,
} from './cluster-secret.js';
import { ErrorCode } from './error-code.js';

const dir = mkdtempSync(join(tmpdir(), 'secret-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const A = Buffer.from('a'.repeat(64));
const B = Buffer.from('b'.repeat(64));
const MAGIC = Buffer.from('KVC1');

describe('secret files', () => {
  it('trims trailing whitespace and needs 32 bytes', () => {
    const f = join(dir, 'ok');
    writeFileSync(f, 'x'.repeat(32) + ' \n\n');
    expect(readSecretFile(f).toString()).toBe('x'.repeat(32));
    const short = join(dir, 'short');
    writeFileSync(short, 'x'.repeat(31) + '\n');
    expect(() => readSecretFile(short)).toThrow(/31 bytes; at least 32/);
    expect(() => readSecretFile(join(dir, 'absent'))).toThrow(SecretFileError);
  });

  it('store secret new writes 64 hex characters, mode 0600, and never overwrites', () => {
    const f = join(dir, 'new');
    writeNewSecret(f);
    expect(readFileSync(f, 'utf8')).toMatch(/^[0-9a-f]{64}\n$/);
    expect(statSync(f).mode & 0o777).toBe(0o600);
    expect(() => writeNewSecret(f)).toThrow(/EEXIST/);
  });

  it('a server needs a secret or the explicit switch; the flag wins over the env', () => {
    expect(() => serverAuthSetting('', false, {})).toThrow(/--allow_unauthenticated/);
    expect(serverAuthSetting('', true, {})).toEqual({ secret: undefined, allowUnauthenticated: true });
    expect(serverAuthSetting('', false, { STORE_ALLOW_UNAUTHENTICATED: '1' }).allowUnauthenticated).toBe(true);
    const f = join(dir, 'ok');
    expect(serverAuthSetting('', false, { STORE_CLUSTER_SECRET_FILE: f }).secret?.toString()).toBe('x'.repeat(32));
    expect(() => serverAuthSetting(join(dir, 'short'), false, { STORE_CLUSTER_SECRET_FILE: f })).toThrow(/31 bytes/);
  });
});

describe('per-call header', () => {
  const now = 1_700_000_000_000;
  it('accepts a signed call once; refuses replay, a wrong secret, another path or body, a stale stamp', () => {
    const cache = new NonceCache();
    const h = signCall(A, 'PUT', '/metadata?key=k', Buffer.from('v'), now);
    expect(verifyCall(B, cache, h, 'PUT', '/metadata?key=k', Buffer.from('v'), now)).toBe('wrong cluster secret');
    expect(verifyCall(A, cache, h, 'PUT', '/metadata?key=other', Buffer.from('v'), now)).toBe('wrong cluster secret');
    expect(verifyCall(A, cache, h, 'PUT', '/metadata?key=k', Buffer.from('w'), now)).toBe('wrong cluster secret');
    expect(verifyCall(A, cache, h, 'PUT', '/metadata?key=k', Buffer.from('v'), now + 1000)).toBeUndefined();
    expect(verifyCall(A, cache, h, 'PUT', '/metadata?key=k', Buffer.from('v'), now + 2000)).toMatch(/replayed/);
    expect(verifyCall(A, cache, h, 'PUT', '/metadata?key=k', Buffer.from('v'), now + 61_000)).toMatch(/off the server's clock/);
    expect(verifyCall(A, cache, signCall(A, 'POST', '/x', undefined, now + 61_000), 'POST', '/x', undefined, now)).toMatch(/off the server's clock/);
    expect(verifyCall(A, cache, undefined, 'POST', '/x', undefined, now)).toMatch(/missing/);
    expect(verifyCall(A, cache, 'v1.garbage', 'POST', '/x', undefined, now)).toMatch(/malformed/);
  });

  it('the nonce cache stays bounded and never lets a dropped nonce replay', () => {
    const cache = new NonceCache(3);
    const heads = [0, 1, 2, 3].map((i) => signCall(A, 'POST', '/p', undefined, now + i));
    for (const h of heads) expect(verifyCall(A, cache, h, 'POST', '/p', undefined, now + 10)).toBeUndefined();
    expect(cache.size).toBe(3);
    // heads[0] was dropped for room: its stamp is below the floor now
    expect(verifyCall(A, cache, heads[0], 'POST', '/p', undefined, now + 10)).toMatch(/replayed/);
    // entries older than the window are dropped on the way
    expect(verifyCall(A, cache, signCall(A, 'POST', '/p', undefined, now + 100_000), 'POST', '/p', undefined, now + 100_000)).toBeUndefined();
    expect(cache.size).toBe(1);
  });
});

/** A listener whose accepted sockets go to `onSocket`; closes everything at the end. */
async function listen(onSocket: (s: Socket) => void): Promise<{ server: Server; port: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((s) => {
    sockets.push(s);
    onSocket(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, sockets };
}

function dial(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

/** Server side as the listeners run it: read the 4-byte magic, then the handshake. */
function serveWith(secret: Buffer, timeoutMs?: number): { outcome: Promise<Buffer>; onSocket: (s: Socket) => void } {
  let settle!: (p: Promise<Buffer>) => void;
  const outcome = new Promise<Buffer>((r) => (settle = r));
  outcome.catch(() => {}); // awaited later by the test
  const onSocket = (s: Socket): void => {
    s.once('readable', () => {
      const head = s.read() as Buffer;
      const p = serverHandshake(s, secret, 'master-channel', head.subarray(4), timeoutMs);
      p.catch(() => s.destroy());
      settle(p);
    });
  };
  return { outcome, onSocket };
}

describe('framed handshake over a real socket', () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });
  async function setup(secret: Buffer, timeoutMs?: number): Promise<{ outcome: Promise<Buffer>; client: Socket }> {
    const { outcome, onSocket } = serveWith(secret, timeoutMs);
    const l = await listen(onSocket);
    const client = await dial(l.port);
    cleanups.push(() => {
      client.destroy();
      for (const s of l.sockets) s.destroy();
      l.server.close();
    });
    return { outcome, client };
  }

  it('the same secret: both sides pass, and bytes sent after it reach the server', async () => {
    const { outcome, client } = await setup(A);
    const rest = await clientHandshake(client, A, 'master-channel', MAGIC);
    expect(rest.length).toBe(0);
    client.write('after');
    await outcome;
  });

  it('a wrong secret: the server refuses, the client gets a typed UNAUTHENTICATED error', async () => {
    const { outcome, client } = await setup(A);
    const err = await clientHandshake(client, B, 'master-channel', MAGIC).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthError);
    expect((err as AuthError).code).toBe(ErrorCode.UNAUTHENTICATED);
    expect((err as Error).message).toMatch(/wrong cluster secret/);
    await expect(outcome).rejects.toBeInstanceOf(HandshakeRefused);
  });

  it('a client without the secret that sends requests at once is refused with an ERROR frame', async () => {
    const { outcome, client } = await setup(A);
    const req = Buffer.alloc(12 + 3);
    req.writeUInt32LE(3, 0);
    req.writeUInt32LE(7, 4); // request id 7
    const got: Buffer[] = [];
    client.on('data', (c: Buffer) => got.push(c));
    const closed = new Promise((r) => client.once('close', r));
    client.write(Buffer.concat([MAGIC, req]));
    await expect(outcome).rejects.toThrow(/requires the cluster secret/);
    await closed;
    const all = Buffer.concat(got);
    // the challenge (12 + 32 bytes), then an ERROR frame for request 7
    const err = all.subarray(44);
    expect(err[10]).toBe(2);
    expect(err.readUInt32LE(4)).toBe(7);
    expect(err.subarray(12).toString()).toMatch(/^UNAUTHENTICATED:/);
  });

  it('a truncated handshake (the client closes half-way) fails the server side', async () => {
    const { outcome, client } = await setup(A);
    client.write(Buffer.concat([MAGIC, Buffer.from([64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0]), Buffer.alloc(10)]));
    client.end();
    await expect(outcome).rejects.toThrow(/closed during the authentication handshake/);
  });

  it('a silent client is closed at the deadline', async () => {
    const { outcome, client } = await setup(A, 200);
    client.write(MAGIC);
    await expect(outcome).rejects.toBeInstanceOf(HandshakeTimeout);
  });

  it('a silent server fails the client at its deadline, with a typed error', async () => {
    const l = await listen(() => {});
    const client = await dial(l.port);
    cleanups.push(() => {
      client.destroy();
      for (const s of l.sockets) s.destroy();
      l.server.close();
    });
    await expect(clientHandshake(client, A, 'master-channel', MAGIC, 200)).rejects.toBeInstanceOf(HandshakeTimeout);
  });

  it('the interface name is bound into the proofs', async () => {
    const l = await listen((s) => {
      s.once('readable', () => {
        const head = s.read() as Buffer;
        serverHandshake(s, A, 'dummy-client', head.subarray(4)).catch(() => s.destroy());
      });
    });
    const client = await dial(l.port);
    cleanups.push(() => {
      client.destroy();
      for (const s of l.sockets) s.destroy();
      l.server.close();
    });
    await expect(clientHandshake(client, A, 'master-channel', MAGIC)).rejects.toThrow(/wrong cluster secret/);
  });
});
