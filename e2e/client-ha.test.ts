// End to end, HA: two store_master processes elect a leader through a redis-server started here;
// a client given master_server_address redis://... finds the leader, and when the leader is
// killed it follows the newly elected one, remounts its segment there and keeps working.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { distRoot, track, type ProcessHandle } from '../sidecar/local-cluster.js';
import { Client } from '../client/client.js';
import { freePort } from './free-port.js';

const hasRedis = (() => {
  try {
    execFileSync('which', ['redis-server'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

const haIt = hasRedis
  ? it
  : (((name: string, fn?: jest.ProvidesCallback, timeout?: number) => it.skip(`${name} (skipped: no redis-server on PATH; apt-get install redis-server)`, fn, timeout)) as jest.It);

describe('client with HA masters', () => {
  const procs: ChildProcess[] = [];
  afterAll(async () => {
    const running = procs.filter((p) => p.exitCode === null && p.signalCode === null);
    for (const p of running) p.kill('SIGKILL');
    await Promise.all(running.map((p) => once(p, 'exit')));
  });

  haIt(
    'follows a newly elected leader after the old one dies (skipped without redis-server)',
    async () => {
      const redisPort = await freePort();
      const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
      procs.push(redis);
      await track('redis', redis).waitFor(/Ready to accept connections/);
      const masters: (ProcessHandle & { rpc: string })[] = [];
      for (let i = 0; i < 2; i++) {
        const p = spawn(
          process.execPath,
          [
            join(distRoot(), 'master/main.js'),
            '--rpc_port=0',
            '--metrics_port=0',
            '--rpc_address=127.0.0.1',
            '--enable_ha=true',
            '--ha_backend_type=redis',
            `--ha_backend_connstring=redis://127.0.0.1:${redisPort}`,
            '--enable_metric_reporting=false',
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        );
        procs.push(p);
        const h = track(`master-${i}`, p);
        const m = await h.waitFor(/store_master listening: rpc=(\S+)/);
        masters.push({ ...h, rpc: m[1] });
      }
      const lines: string[] = [];
      let onLine: ((l: string) => void) | undefined;
      const client = await Client.setup(
        {
          local_hostname: '127.0.0.1',
          metadata_server: 'P2PHANDSHAKE',
          global_segment_size: 16 << 20,
          local_buffer_size: 4 << 20,
          master_server_address: `redis://127.0.0.1:${redisPort}`,
        },
        { heartbeatIntervalMs: 200, log: (_l, msg) => (lines.push(msg), onLine?.(msg)) },
      );
      try {
        await client.put('before', Buffer.from('one'));
        const leaderIndex = await Promise.race(masters.map((m, i) => m.waitFor(/HA: elected leader/).then(() => i)));
        const follower = masters[1 - leaderIndex];
        const switched = new Promise<void>((resolve) => {
          onLine = (l) => l.includes(`remounted 1 segment(s) on master leader ${follower.rpc}`) && resolve();
          if (lines.some((l) => l.includes(`remounted 1 segment(s) on master leader ${follower.rpc}`))) resolve();
        });
        masters[leaderIndex].proc.kill('SIGKILL');
        await switched;
        const seg = client.mountedSegments[0].name;
        await client.put('after', Buffer.from('two'), { preferred_segment: seg });
        expect((await client.get('after')).toString()).toBe('two');
      } finally {
        await client.close();
      }
    },
    60_000,
  );
});
