// A master and a store service both with --tls_cert/--tls_key (real processes, certificates made
// by openssl): the store service reaches the master's HTTPS metadata server with STORE_TLS_CA_FILE,
// its REST API answers over HTTPS and tells a plain client to use https, gRPC on its --rpc_port
// is TLS only, and KVD1 stays plain. Run `npm run build` first.
import { rmSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';
import { grpcAuthOptions } from '../common/grpc-auth.js';
import { protoPath } from '../common/service-proto.js';
import { controlFetch } from '../common/tls-fetch.js';
import { loadTlsMaterial } from '../common/tls-material.js';
import { makeTestCerts, type TestCerts } from './tls-certs.js';

let c: TestCerts;
let cluster: LocalCluster;
let svc: StoreServiceProcess;

beforeAll(async () => {
  c = makeTestCerts();
  const tlsArgs = [`--tls_cert=${c.serverCert}`, `--tls_key=${c.serverKey}`];
  cluster = await LocalCluster.start({ storeServices: 0, segmentSize: '16MB', masterArgs: tlsArgs, serviceArgs: tlsArgs, env: { ...process.env, STORE_TLS_CA_FILE: c.ca } });
  svc = await cluster.addService();
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
  rmSync(c.dir, { recursive: true, force: true });
}, 30_000);

function dummyStub(creds: grpc.ChannelCredentials) {
  const def = protoLoader.loadSync(protoPath('store_client.proto'), { keepCase: true, longs: Number, enums: Number, defaults: true });
  const Ctor = grpc.loadPackageDefinition(def).store as unknown as { ClientService: grpc.ServiceClientConstructor };
  const stub = new Ctor.ClientService(svc.rpc, creds, grpcAuthOptions()); // calls carry the cluster secret's header
  const call = (name: string, req: object) =>
    new Promise<Record<string, unknown>>((resolve, reject) =>
      (stub[name] as (...args: unknown[]) => void).call(stub, req, { deadline: Date.now() + 10_000 }, (e: Error | null, r: Record<string, unknown>) =>
        e ? reject(e) : resolve(r),
      ),
    );
  return { call, close: () => stub.close() };
}

describe('store_service with TLS', () => {
  it('mounted its segment through the HTTPS metadata server', () => {
    expect(cluster.master.metadata).toMatch(/^https:\/\//);
    expect(svc.output()).toMatch(/store_service ready: .* tls=on/);
  });

  it('serves its HTTP over TLS only', async () => {
    const ca = loadTlsMaterial({ ca: c.ca });
    const res = await controlFetch(`http://${svc.http}/segments`, {}, ca);
    expect(res.status).toBe(200);
    expect((await res.json()) as object).toMatchObject({ client_id: svc.clientId });
    const plain = await fetch(`http://${svc.http}/health`);
    expect(plain.status).toBe(400);
    expect(await plain.text()).toContain('the store service HTTP serves HTTPS only on this port');
  });

  it('serves dummy-client gRPC over TLS and refuses plain gRPC', async () => {
    const tls = dummyStub(grpc.credentials.createSsl(loadTlsMaterial({ ca: c.ca }).ca));
    try {
      expect((await tls.call('Put', { key: 'tls-k', value: Buffer.from('over tls') })).status_code).toBe(0);
      expect(Buffer.from((await tls.call('Get', { key: 'tls-k' })).value as Buffer).toString()).toBe('over tls');
    } finally {
      tls.close();
    }
    const plain = dummyStub(grpc.credentials.createInsecure());
    try {
      await expect(plain.call('Get', { key: 'tls-k' })).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    } finally {
      plain.close();
    }
    expect(svc.output()).toContain('plain gRPC on a TLS port refused');
  });
});
