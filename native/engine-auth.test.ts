// The cluster secret's handshake at connection setup (authSecret, src/auth_handshake.h): engines
// with the same secret transfer both ways over TCP and shm; a wrong secret, or a secret on one side
// only, is refused in both directions with UNAUTHENTICATED and counted (authRefused) by the side
// that refuses; the shm control socket gives no fd before the handshake; a silent peer is closed
// after the deadline; and the wire is checked against an independent implementation (node:crypto).
import { createHash, randomBytes, randomFillSync } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { mapMemory, TransferEngine, TransferError, type MemoryRegion, type TransferEngineOptions } from './index.js';
import { rejection } from './test-fixtures/rejection.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';
import { requestHeader } from './test-fixtures/raw-wire.js';
import {
  ByteReader,
  clientHandshake,
  proof,
  rawSocket,
  refusalFrame,
  rawShmSocket,
  SHM_HELLO,
  SHM_REQUEST_MAGIC,
  SHM_RESPONSE_MAGIC,
  SHM_UNAUTHENTICATED,
  TCP_HELLO,
  TCP_RESPONSE_MAGIC,
  TCP_UNAUTHENTICATED,
  u32,
} from './test-fixtures/auth-wire.js';

const MiB = 1024 * 1024;
const PEER_SIZE = 8 * MiB;
const ports = { minPort: 20000, maxPort: 32000 };
const SECRET = randomBytes(32);
const OTHER = randomBytes(48);

let local: MemoryRegion;
const engines: TransferEngine[] = [];
const peers: RegionPeer[] = [];

beforeAll(() => {
  ensureAddon();
  local = mapMemory({ size: PEER_SIZE });
});

afterAll(async () => {
  for (const e of engines) e.close();
  local?.release();
  for (const p of peers) await p.stop();
});

function engine(opts: TransferEngineOptions): TransferEngine {
  const e = new TransferEngine({ ...ports, env: {}, ...opts });
  engines.push(e);
  e.start();
  e.registerRegion(local.address, local.size);
  return e;
}

async function peer(seed: number, opts: { secret?: Buffer; shm: boolean }): Promise<RegionPeer> {
  const p = await startRegionPeer(PEER_SIZE, seed, { shmTransport: opts.shm, ...(opts.secret ? { authSecretHex: opts.secret.toString('hex') } : {}) });
  peers.push(p);
  return p;
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const localBytes = (offset: number, length: number) => new Uint8Array(local.buffer, offset, length);

test('authSecret must be a Buffer of at least 32 bytes (TypeError), authTimeoutMs a positive integer', () => {
  expect(() => new TransferEngine({ ...ports, env: {}, authSecret: 'x'.repeat(40) as unknown as Buffer })).toThrow(TypeError);
  expect(() => new TransferEngine({ ...ports, env: {}, authSecret: Buffer.alloc(31) })).toThrow(/at least 32 bytes, got 31/);
  expect(() => new TransferEngine({ ...ports, env: {}, authSecret: Buffer.alloc(31) })).toThrow(TypeError);
  expect(() => new TransferEngine({ ...ports, env: {}, authSecret: SECRET, authTimeoutMs: 0 })).toThrow(TransferError);
});

describe.each([
  ['TCP', false],
  ['shm', true],
])('over %s', (_name, shm) => {
  test('the same secret: transfers both ways, nothing refused', async () => {
    const e = engine({ authSecret: SECRET, shmTransport: shm });
    const p = await peer(1, { secret: SECRET, shm });
    await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address + 3, localAddress: local.address, length: 2 * MiB + 1 }]);
    expect(sha(localBytes(0, 2 * MiB + 1))).toBe(await p.sha256(3, 2 * MiB + 1));
    randomFillSync(localBytes(0, MiB));
    await e.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]);
    expect(await p.sha256(0, MiB)).toBe(sha(localBytes(0, MiB)));
    if (shm) {
      // Only shared memory can serve a frozen peer: the grant came through the authenticated socket.
      process.kill(p.pid, 'SIGSTOP');
      try {
        randomFillSync(localBytes(0, MiB));
        await e.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]);
      } finally {
        process.kill(p.pid, 'SIGCONT');
      }
      expect(await p.sha256(0, MiB)).toBe(sha(localBytes(0, MiB)));
    }
    // The other direction: the peer dials this engine.
    randomFillSync(localBytes(4 * MiB, MiB));
    expect(await p.transfer({ op: 'read', endpoint: e.endpoint, remoteAddress: local.address + 4 * MiB, offset: 0, length: MiB })).toEqual({ ok: true });
    expect(await p.sha256(0, MiB)).toBe(sha(localBytes(4 * MiB, MiB)));
    expect(e.stats().authRefused).toBe(0);
    expect((await p.stats()).authRefused).toBe(0);
  });

  test('different secrets: refused both ways with UNAUTHENTICATED, counted by the refusing side, nothing moved', async () => {
    const e = engine({ authSecret: SECRET, shmTransport: shm });
    const p = await peer(2, { secret: OTHER, shm });
    const before = await p.sha256(0, MiB);
    randomFillSync(localBytes(0, MiB));
    const err = await rejection(e.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]));
    expect(err.code).toBe('UNAUTHENTICATED');
    expect(err.message).toMatch(/refused our authentication proof: its authSecret differs/);
    expect(err.endpoints).toEqual([p.endpoint]);
    expect(await p.sha256(0, MiB)).toBe(before);
    expect((await p.stats()).authRefused).toBeGreaterThan(0);

    const mine = sha(localBytes(0, MiB));
    const r = await p.transfer({ op: 'write', endpoint: e.endpoint, remoteAddress: local.address, offset: 0, length: MiB });
    expect(r.error).toBe('UNAUTHENTICATED');
    expect(sha(localBytes(0, MiB))).toBe(mine);
    expect(e.stats().authRefused).toBeGreaterThan(0);
  });

  test('a secret on one side only: refused both ways with UNAUTHENTICATED, counted by the refusing side', async () => {
    // This engine has the secret, the peer none.
    const e = engine({ authSecret: SECRET, shmTransport: shm });
    const p = await peer(3, { shm });
    const err = await rejection(e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 4096 }]));
    expect(err.code).toBe('UNAUTHENTICATED');
    expect(err.message).toMatch(/runs without authSecret/);
    expect((await p.stats()).authRefused).toBeGreaterThan(0);
    const mine = sha(localBytes(0, MiB));
    const r = await p.transfer({ op: 'write', endpoint: e.endpoint, remoteAddress: local.address, offset: 0, length: MiB });
    expect(r.error).toBe('UNAUTHENTICATED');
    expect(r.message).toMatch(/requires authentication and this engine has no authSecret/);
    expect(sha(localBytes(0, MiB))).toBe(mine);
    expect(e.stats().authRefused).toBeGreaterThan(0);

    // The reverse: the peer has the secret, this engine none.
    const plain = engine({ shmTransport: shm });
    const q = await peer(4, { secret: SECRET, shm });
    const before = await q.sha256(0, MiB);
    const err2 = await rejection(plain.transfer([{ op: 'write', endpoint: q.endpoint, remoteAddress: q.address, localAddress: local.address, length: MiB }]));
    expect(err2.code).toBe('UNAUTHENTICATED');
    expect(err2.message).toMatch(/requires authentication and this engine has no authSecret/);
    expect(await q.sha256(0, MiB)).toBe(before);
    expect((await q.stats()).authRefused).toBeGreaterThan(0);
    const r2 = await q.transfer({ op: 'read', endpoint: plain.endpoint, remoteAddress: local.address, offset: 0, length: 4096 });
    expect(r2.error).toBe('UNAUTHENTICATED');
    expect(r2.message).toMatch(/runs without authSecret/);
    expect(plain.stats().authRefused).toBeGreaterThan(0);
  });
});

describe('the wire, against node:crypto', () => {
  test('a client speaking the handshake by hand is served over TCP, and gets the server proof', async () => {
    const e = engine({ authSecret: SECRET, shmTransport: false });
    randomFillSync(localBytes(0, 4096));
    const r = await rawSocket(e.endpoint);
    const nc = randomBytes(32);
    const { ns, reply } = await clientHandshake(r, SECRET, 'transfer-tcp', TCP_HELLO, nc);
    expect(reply).toEqual(proof(SECRET, 'server', 'transfer-tcp', ns, nc));
    r.sock.write(requestHeader({ op: 'read', address: local.address, length: 4096 }));
    const head = await r.read(24);
    expect(head.readUInt32LE(0)).toBe(TCP_RESPONSE_MAGIC);
    expect(head.readInt32LE(4)).toBe(0);
    expect(sha(await r.read(4096))).toBe(sha(localBytes(0, 4096)));
    r.sock.destroy();
  });

  test('a wrong proof gets the refusal frame and the close; a hello to an engine without a secret too', async () => {
    const e = engine({ authSecret: SECRET, shmTransport: false });
    const r = await rawSocket(e.endpoint);
    const { reply } = await clientHandshake(r, OTHER, 'transfer-tcp', TCP_HELLO, randomBytes(32));
    expect(reply).toEqual(refusalFrame(TCP_RESPONSE_MAGIC, TCP_UNAUTHENTICATED));
    await r.closed;
    expect(e.stats().authRefused).toBe(1);
    // A proof for the other interface is a wrong proof too.
    const r2 = await rawSocket(e.endpoint);
    expect((await clientHandshake(r2, SECRET, 'transfer-shm', TCP_HELLO, randomBytes(32))).reply).toEqual(refusalFrame(TCP_RESPONSE_MAGIC, TCP_UNAUTHENTICATED));
    expect(e.stats().authRefused).toBe(2);

    const plain = engine({ shmTransport: false });
    const r3 = await rawSocket(plain.endpoint);
    r3.sock.write(u32(TCP_HELLO));
    expect(await r3.rest()).toEqual(refusalFrame(TCP_RESPONSE_MAGIC, TCP_UNAUTHENTICATED));
    expect(plain.stats().authRefused).toBe(1);
  });

  test('the shm control socket gives no fd before the handshake, and grants after it', async () => {
    const e = engine({ authSecret: SECRET, shmTransport: true });
    const request = Buffer.alloc(24);
    request.writeUInt32LE(SHM_REQUEST_MAGIC, 0);
    request.writeBigUInt64LE(BigInt(local.address), 8);
    request.writeBigUInt64LE(4096n, 16);
    // No handshake: one answer, UNAUTHENTICATED (no fd), then the close.
    const r = rawShmSocket(e.endpoint);
    r.sock.write(request);
    const answer = await r.rest();
    expect(answer.length).toBe(64);
    expect(answer.readUInt32LE(0)).toBe(SHM_RESPONSE_MAGIC);
    expect(answer.readInt32LE(4)).toBe(SHM_UNAUTHENTICATED);
    expect(e.stats().authRefused).toBe(1);
    // With the handshake (the shm interface's proofs), the same request is granted (status 0).
    const r2 = rawShmSocket(e.endpoint);
    const nc = randomBytes(32);
    const { ns, reply } = await clientHandshake(r2, SECRET, 'transfer-shm', SHM_HELLO, nc);
    expect(reply).toEqual(proof(SECRET, 'server', 'transfer-shm', ns, nc));
    r2.sock.write(request);
    const granted = await r2.read(64);
    expect(granted.readUInt32LE(0)).toBe(SHM_RESPONSE_MAGIC);
    expect(granted.readInt32LE(4)).toBe(0);
    r2.sock.destroy();
    // A TCP proof is refused here.
    const r3 = rawShmSocket(e.endpoint);
    expect((await clientHandshake(r3, SECRET, 'transfer-tcp', SHM_HELLO, randomBytes(32))).reply).toEqual(refusalFrame(SHM_RESPONSE_MAGIC, SHM_UNAUTHENTICATED));
    expect(e.stats().authRefused).toBe(2);
  });

  test('a silent peer is closed after the handshake deadline, whether it sent nothing or only the hello', async () => {
    const e = engine({ authSecret: SECRET, shmTransport: true, authTimeoutMs: 200 });
    const silent = await rawSocket(e.endpoint);
    const helloOnly = await rawSocket(e.endpoint);
    helloOnly.sock.write(u32(TCP_HELLO));
    const shmSilent = rawShmSocket(e.endpoint);
    await Promise.all([silent.closed, helloOnly.closed, shmSilent.closed]);
    expect((await helloOnly.rest()).length).toBe(32); // the challenge, then nothing more
    expect(e.stats().authRefused).toBe(3);
  });

  test('this engine dialing: its proof verifies with node:crypto; a server that cannot prove the secret is refused; a silent one times out', async () => {
    const seen: Array<'verified' | 'bad proof'> = [];
    let mode: 'good' | 'bad' | 'silent' = 'good';
    const server = createServer((sock: Socket) => {
      const r = new ByteReader(sock);
      if (mode === 'silent') return; // accepts and never answers
      void (async () => {
        if ((await r.read(4)).readUInt32LE(0) !== TCP_HELLO) return sock.destroy();
        const ns = randomBytes(32);
        sock.write(ns);
        const answer = await r.read(64);
        const nc = answer.subarray(0, 32);
        seen.push(answer.subarray(32).equals(proof(SECRET, 'client', 'transfer-tcp', ns, nc)) ? 'verified' : 'bad proof');
        sock.write(mode === 'good' ? proof(SECRET, 'server', 'transfer-tcp', ns, nc) : proof(OTHER, 'server', 'transfer-tcp', ns, nc));
        for (;;) {
          const req = await r.read(64);
          if (req.length < 64) return;
          const resp = Buffer.alloc(24);
          resp.writeUInt32LE(TCP_RESPONSE_MAGIC, 0);
          resp.writeBigUInt64LE(req.readBigUInt64LE(8), 8);
          resp.writeBigUInt64LE(req.readBigUInt64LE(24), 16);
          sock.write(Buffer.concat([resp, Buffer.alloc(Number(req.readBigUInt64LE(24)), 7)]));
        }
      })();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const endpoint = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const e = engine({ authSecret: SECRET, shmTransport: false, connectionsPerPeer: 1, authTimeoutMs: 300 });
      await e.transfer([{ op: 'read', endpoint, remoteAddress: 4096, localAddress: local.address, length: 1000 }]);
      expect(seen).toEqual(['verified']);
      expect(Buffer.from(localBytes(0, 1000)).equals(Buffer.alloc(1000, 7))).toBe(true);
      expect(e.stats().authRefused).toBe(0);

      mode = 'bad';
      const e2 = engine({ authSecret: SECRET, shmTransport: false, connectionsPerPeer: 1, authTimeoutMs: 300 });
      const err = await rejection(e2.transfer([{ op: 'read', endpoint, remoteAddress: 4096, localAddress: local.address, length: 1000 }]));
      expect(err.code).toBe('UNAUTHENTICATED');
      expect(err.message).toMatch(/failed to prove the cluster secret/);
      expect(e2.stats().authRefused).toBe(1);

      mode = 'silent';
      const e3 = engine({ authSecret: SECRET, shmTransport: false, connectionsPerPeer: 1, authTimeoutMs: 300 });
      const err3 = await rejection(e3.transfer([{ op: 'read', endpoint, remoteAddress: 4096, localAddress: local.address, length: 1000 }]));
      expect(err3.code).toBe('TIMEOUT');
      expect(err3.message).toMatch(/did not complete the authentication handshake within 300 ms/);
      expect(err3.endpoints).toEqual([endpoint]);
    } finally {
      server.close();
    }
  });
});
