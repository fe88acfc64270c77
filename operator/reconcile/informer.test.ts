// The informer (ListWatch of @kubernetes/client-node plus restart, resync and sync) against the
// test API server: the initial list and live changes arrive as ADDED/MODIFIED/DELETED, resync
// replays the cache, a watch the server ends is resumed, a watch older than the server's history
// (410 Gone) relists and reports what changed meanwhile, and a dropped connection is reconnected.
import type { KubernetesObject } from '@kubernetes/client-node';
import { startKubeFixture, type KubeFixture } from '../testing/kube-fixture.js';
import { Informer, type ChangeType } from './informer.js';
import { KubeClient, type ListResult, type Ref } from './kube-client.js';

const NS = 'watch';
let fx: KubeFixture;

/** Counts lists, so a test can tell a relist from a resumed watch. */
class CountingClient extends KubeClient {
  lists = 0;
  override list<T extends KubernetesObject>(ref: Ref, labelSelector?: string): Promise<ListResult<T>> {
    this.lists++;
    return super.list<T>(ref, labelSelector);
  }
}

interface Seen {
  type: ChangeType;
  name: string;
}

/** An informer on ConfigMaps labelled app=x, recording changes and letting tests await one. */
function watchConfigMaps(resyncMs = 3_600_000) {
  const api = new CountingClient(fx.kc);
  const seen: Seen[] = [];
  const logs: string[] = [];
  const waiters: { pred: (s: Seen) => boolean; resolve: () => void }[] = [];
  const informer = new Informer(fx.kc, api, {
    kind: 'ConfigMap',
    namespace: NS,
    labelSelector: 'app=x',
    resyncMs,
    backoffMs: () => 10,
    log: (m) => logs.push(m),
    onChange: (o, type) => {
      const s = { type, name: o.metadata?.name ?? '' };
      seen.push(s);
      for (const w of waiters.splice(0))
        if (w.pred(s)) w.resolve();
        else waiters.push(w);
    },
  });
  const until = (type: ChangeType, name: string) =>
    seen.some((s) => s.type === type && s.name === name)
      ? Promise.resolve()
      : new Promise<void>((resolve) => waiters.push({ pred: (s) => s.type === type && s.name === name, resolve }));
  return { api, informer, seen, logs, until };
}

const cm = (name: string, data = '1') => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: NS, labels: { app: 'x' } }, data: { v: data } });
const configMaps = () => fx.server.store.registry.get('', 'v1', 'configmaps')!;

/** Resolves once the server holds at least `n` open watches (a client has (re)connected). */
async function watchesOpen(n: number): Promise<void> {
  while (fx.server.openWatches < n) await new Promise((r) => setImmediate(r));
}

beforeAll(async () => {
  fx = await startKubeFixture(NS);
});
afterAll(() => fx.server.stop());

describe('Informer', () => {
  it('lists, then reports creations, updates and deletions from the watch', async () => {
    await fx.call('POST', `/api/v1/namespaces/${NS}/configmaps`, cm('before'));
    await fx.call('POST', `/api/v1/namespaces/${NS}/configmaps`, { ...cm('other'), metadata: { name: 'other', namespace: NS, labels: { app: 'y' } } });
    const w = watchConfigMaps();
    w.informer.start();
    try {
      await w.informer.hasSynced();
      expect(w.informer.list().map((o) => o.metadata?.name)).toEqual(['before']);
      expect(w.informer.get(NS, 'before')?.kind).toBe('ConfigMap');
      await watchesOpen(1);
      await fx.call('POST', `/api/v1/namespaces/${NS}/configmaps`, cm('live'));
      await w.until('ADDED', 'live');
      await fx.call('PATCH', `/api/v1/namespaces/${NS}/configmaps/live`, { data: { v: '2' } }, 'application/merge-patch+json');
      await w.until('MODIFIED', 'live');
      await fx.call('DELETE', `/api/v1/namespaces/${NS}/configmaps/live`);
      await w.until('DELETED', 'live');
      expect(w.seen).toEqual([
        { type: 'ADDED', name: 'before' },
        { type: 'ADDED', name: 'live' },
        { type: 'MODIFIED', name: 'live' },
        { type: 'DELETED', name: 'live' },
      ]);
      expect(w.api.lists).toBe(1);
    } finally {
      w.informer.stop();
      await fx.call('DELETE', `/api/v1/namespaces/${NS}/configmaps/before`);
    }
  });

  it('replays every cached object on resync', async () => {
    await fx.call('POST', `/api/v1/namespaces/${NS}/configmaps`, cm('resync-me'));
    const w = watchConfigMaps(20);
    w.informer.start();
    try {
      await w.until('RESYNC', 'resync-me');
    } finally {
      w.informer.stop();
      await fx.call('DELETE', `/api/v1/namespaces/${NS}/configmaps/resync-me`);
    }
  });

  it('resumes a watch the server ends, without relisting', async () => {
    const w = watchConfigMaps();
    w.informer.start();
    try {
      await w.informer.hasSynced();
      await watchesOpen(1);
      fx.server.closeWatches();
      await watchesOpen(1);
      await fx.call('POST', `/api/v1/namespaces/${NS}/configmaps`, cm('after-close'));
      await w.until('ADDED', 'after-close');
      expect(w.api.lists).toBe(1);
    } finally {
      w.informer.stop();
      await fx.call('DELETE', `/api/v1/namespaces/${NS}/configmaps/after-close`);
    }
  });

  it('relists on 410 Gone and reports what changed while its version was compacted away', async () => {
    await fx.call('POST', `/api/v1/namespaces/${NS}/configmaps`, cm('doomed'));
    await fx.call('POST', `/api/v1/namespaces/${NS}/configmaps`, cm('changed'));
    const w = watchConfigMaps();
    w.informer.start();
    try {
      await w.informer.hasSynced();
      await watchesOpen(1);
      // All in one turn of the event loop: the informer's next watch starts after these.
      fx.server.closeWatches();
      const store = fx.server.store;
      store.delete(configMaps(), NS, 'doomed');
      store.patch(configMaps(), NS, 'changed', 'merge', { data: { v: '2' } });
      store.create(configMaps(), NS, cm('born'));
      store.compact();
      await w.until('ADDED', 'born');
      await w.until('DELETED', 'doomed');
      await w.until('MODIFIED', 'changed');
      expect(w.api.lists).toBe(2);
      expect(
        w.informer
          .list()
          .map((o) => o.metadata?.name)
          .sort(),
      ).toEqual(['born', 'changed']);
    } finally {
      w.informer.stop();
      for (const n of ['born', 'changed']) await fx.call('DELETE', `/api/v1/namespaces/${NS}/configmaps/${n}`);
    }
  });

  it('reconnects after the connection drops, and logs the retry', async () => {
    const w = watchConfigMaps();
    w.informer.start();
    try {
      await w.informer.hasSynced();
      await watchesOpen(1);
      fx.server.dropWatches();
      await fx.call('POST', `/api/v1/namespaces/${NS}/configmaps`, cm('after-drop'));
      await w.until('ADDED', 'after-drop');
      // ListWatch alone stops on this error; the informer restarts it.
      expect(w.logs).toEqual([expect.stringMatching(/^informer ConfigMap: .+; retrying in 10ms$/)]);
    } finally {
      w.informer.stop();
      await fx.call('DELETE', `/api/v1/namespaces/${NS}/configmaps/after-drop`);
    }
  });

  it('keeps retrying a failing list with backoff, and syncs once the server answers', async () => {
    const api = new CountingClient(fx.kc);
    let failLeft = 2;
    const real = api.list.bind(api);
    api.list = (ref, sel) => (failLeft-- > 0 ? Promise.reject(new Error('list refused')) : real(ref, sel));
    const logs: string[] = [];
    const informer = new Informer(fx.kc, api, { kind: 'ConfigMap', namespace: NS, resyncMs: 3_600_000, backoffMs: (n) => n, log: (m) => logs.push(m), onChange: () => undefined });
    informer.start();
    try {
      await informer.hasSynced();
      expect(logs).toEqual(['informer ConfigMap: list refused; retrying in 1ms', 'informer ConfigMap: list refused; retrying in 2ms']);
    } finally {
      informer.stop();
    }
  });
});
