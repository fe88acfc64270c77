// End to end, a client's setup with an HA master address whose leader record names a master that
// does not serve (an election moved on after the client read it): the registration must read the
// leader again rather than retry the same master until it gives up. Two store_master processes
// elect on a Lease of the test Kubernetes API server; the client is pointed (k8s://) at a second
// Lease this test writes by hand, first naming the follower, then, once the first attempt was
// refused, the leader. Run `npm run build` first.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { Client } from '../client/client.js';
import { distRoot, type ProcessHandle } from '../sidecar/local-cluster.js';
import { Processes } from './ha-backends.js';

const MAIN = join(distRoot(), 'master', 'main.js');
const ps = new Processes();
afterEach(() => ps.stopAll());

(existsSync(MAIN) ? it : it.skip)(
  'registration reads the leader again after a master answered UNAVAILABLE_IN_CURRENT_STATUS (skipped without dist/: npm run build)',
  async () => {
    const backend = await ps.k8s('reg_k8s');
    const masters: (ProcessHandle & { rpc: string })[] = [];
    for (let i = 0; i < 2; i++) {
      const h = ps.start(
        `master-${i}`,
        process.execPath,
        [MAIN, '--enable_ha=true', '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', '--enable_metric_reporting=false', ...backend.masterArgs],
        backend.env,
      );
      masters.push({ ...h, rpc: (await h.waitFor(/store_master listening: rpc=(\S+)/))[1] });
    }
    const li = await Promise.race(masters.map((m, i) => m.waitFor(/HA: elected leader/).then(() => i)));
    const [leader, follower] = [masters[li], masters[1 - li]];

    const kc = new KubeConfig();
    kc.loadFromFile(backend.env!.KUBECONFIG);
    const leases = kc.makeApiClient(CoordinationV1Api);
    const name = (holder: string, address: string) => ({
      metadata: { name: 'pointer', namespace: 'kv', annotations: { 'store.kvcache.io/leader-address': address } },
      spec: { holderIdentity: holder, leaseDurationSeconds: 3600 },
    });
    await leases.createNamespacedLease({ namespace: 'kv', body: name('ghost-1', follower.rpc) });

    let refused: () => void = () => undefined;
    const firstRefusal = new Promise<void>((r) => (refused = r));
    const setup = Client.setup(
      {
        local_hostname: '127.0.0.1',
        metadata_server: 'P2PHANDSHAKE',
        global_segment_size: 16 << 20,
        local_buffer_size: 4 << 20,
        protocol: 'tcp',
        master_server_address: 'k8s://kv/pointer',
      },
      {
        // Few attempts: without reading the leader again, setup fails here instead of retrying for a minute.
        env: { ...process.env, ...backend.env, MC_STORE_CLIENT_SETUP_RETRIES: '4' },
        log: (_l, msg) => /registration attempt 1 failed .*UNAVAILABLE_IN_CURRENT_STATUS/.test(msg) && refused(),
      },
    );
    await firstRefusal;
    const current = await leases.readNamespacedLease({ name: 'pointer', namespace: 'kv' });
    await leases.replaceNamespacedLease({
      name: 'pointer',
      namespace: 'kv',
      body: { ...current, ...name('ghost-2', leader.rpc), metadata: { ...current.metadata, annotations: name('', leader.rpc).metadata.annotations } },
    });
    const client = await setup;
    try {
      await client.put('k', Buffer.from('on the leader'));
      expect((await client.get('k')).toString()).toBe('on the leader');
    } finally {
      await client.close();
    }
  },
  60_000,
);
