// The optional StatefulSet controller: pods follow spec.replicas, status follows the pods, and
// the pods go with the set (garbage collection by owner reference).

import { KubeApiServer, startKubeApiServer } from './http-server.js';
import { waitForObject, WatchStream } from './watch-client.js';

let server: KubeApiServer;
beforeAll(async () => {
  server = await startKubeApiServer({ statefulSetController: true });
});
afterAll(() => server.stop());

const S = '/apis/apps/v1/namespaces/default/statefulsets';
const P = '/api/v1/namespaces/default/pods';

async function call(method: string, path: string, body?: unknown, ct = 'application/json') {
  const res = await fetch(server.url + path, { method, headers: { 'Content-Type': ct }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

test('pods are created Ready, scaled down from the highest ordinal, and collected with the set', async () => {
  const sts = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'db' },
    spec: {
      replicas: 3,
      serviceName: 'db',
      selector: { matchLabels: { app: 'db' } },
      template: { metadata: { labels: { app: 'db' } }, spec: { containers: [{ name: 'db', image: 'db:1' }] } },
    },
  };
  expect((await call('POST', S, sts)).status).toBe(201);
  const ready = await waitForObject(server.url, S, (o) => o.metadata.name === 'db' && o.status?.readyReplicas === 3);
  expect(ready.status).toMatchObject({ replicas: 3, updatedReplicas: 3, observedGeneration: 1 });
  const pods = (await call('GET', `${P}?labelSelector=app%3Ddb`)).body.items;
  expect(pods.map((p: any) => p.metadata.name)).toEqual(['db-0', 'db-1', 'db-2']);
  expect(pods[0].status.conditions.find((c: any) => c.type === 'Ready').status).toBe('True');
  expect(pods[2].metadata.labels['statefulset.kubernetes.io/pod-name']).toBe('db-2');

  const rv = (await call('GET', P)).body.metadata.resourceVersion;
  const w = new WatchStream(server.url, `${P}?resourceVersion=${rv}`);
  await call('PATCH', `${S}/db`, { spec: { replicas: 1 } }, 'application/merge-patch+json');
  await waitForObject(server.url, S, (o) => o.metadata.name === 'db' && o.status?.readyReplicas === 1 && o.status.observedGeneration === 2);
  await w.next((e) => e.type === 'DELETED' && e.object.metadata.name === 'db-1');
  w.close();
  expect(w.events.filter((e) => e.type === 'DELETED').map((e) => e.object.metadata.name)).toEqual(['db-2', 'db-1']);

  await call('DELETE', `${S}/db`);
  expect((await call('GET', P)).body.items).toEqual([]);
});
