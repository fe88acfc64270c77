// End to end, the client's life with the master: registration retried until a late master comes
// up, a clear failure when the retries run out, and segments remounted on a restarted master (which
// answers the heartbeat with need_remount). Real processes from dist/; run `npm run build` first.
import { LocalCluster } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { UnavailableError } from '../client/errors.js';
import { freePort } from './free-port.js';

const MiB = 1024 * 1024;

/** A log sink whose lines can be awaited. */
function logSink() {
  const lines: string[] = [];
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  return {
    lines,
    log: (_level: string, msg: string) => {
      lines.push(msg);
      for (const w of waiters.splice(0))
        if (w.re.test(msg)) w.resolve();
        else waiters.push(w);
    },
    next: (re: RegExp) => new Promise<void>((resolve) => waiters.push({ re, resolve })),
  };
}

const config = (rpc: string, overrides = {}) => ({
  local_hostname: '127.0.0.1',
  metadata_server: 'P2PHANDSHAKE',
  global_segment_size: 16 * MiB,
  local_buffer_size: 4 * MiB,
  protocol: 'tcp',
  master_server_address: rpc,
  ...overrides,
});

describe('client registration and liveness', () => {
  it('retries registration until a late master comes up', async () => {
    const port = await freePort();
    const sink = logSink();
    const firstFailure = sink.next(/registration attempt 1 failed/);
    const setup = Client.setup(config(`127.0.0.1:${port}`), { log: sink.log });
    // The master is not there yet: the first attempt fails (a setup that settles first is a failure).
    await Promise.race([firstFailure, setup.then(() => Promise.reject(new Error('setup succeeded without a master')))]);
    const cluster = await LocalCluster.start({ rpcPort: port });
    try {
      const client = await setup;
      try {
        expect((await cluster.admin('/get_all_segments')).split('\n')).toContain(client.mountedSegments[0].name);
        await client.put('late', Buffer.from('master'));
        expect((await client.get('late')).toString()).toBe('master');
      } finally {
        await client.close();
      }
    } finally {
      await cluster.stop();
    }
  });

  it('fails clearly once MC_STORE_CLIENT_SETUP_RETRIES are spent', async () => {
    const port = await freePort();
    const err = await Client.setup(config(`127.0.0.1:${port}`), { env: { MC_STORE_CLIENT_SETUP_RETRIES: '1' }, log: () => {} }).catch((e) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect(err.message).toMatch(/registration with master 127\.0\.0\.1:\d+ failed after 2 attempt/);
  });

  it('remounts its segment on a restarted master that asks for it', async () => {
    const cluster = await LocalCluster.start({ rpcPort: await freePort(), metadataPort: await freePort() });
    try {
      const sink = logSink();
      const client = await Client.setup(config(cluster.master.rpc, { metadata_server: cluster.master.metadata }), {
        heartbeatIntervalMs: 100,
        log: sink.log,
      });
      try {
        const seg = client.mountedSegments[0].name;
        const remounted = sink.next(/remounted 1 segment/);
        await cluster.restartMaster(); // a new master knows nothing
        await remounted;
        expect((await cluster.admin('/get_all_segments')).split('\n')).toContain(seg);
        await client.put('after-restart', Buffer.from('still here'), { preferred_segment: seg });
        expect((await client.get('after-restart')).toString()).toBe('still here');
      } finally {
        await client.close();
      }
    } finally {
      await cluster.stop(); // even when setup fails, the master it started must not outlive the test
    }
  });
});
