// Self-signed webhook certificates (real openssl), the rotation rule, and the HTTPS server
// answering an AdmissionReview over real TLS verified against the generated CA.
import * as https from 'node:https';
import { X509Certificate } from 'node:crypto';
import { defaultStoreCluster } from '../api/defaults.js';
import { generateCerts, needsRotation, serviceDnsNames } from './certs.js';
import { WebhookServer } from './server.js';

const names = serviceDnsNames('store-operator-webhook', 'store-system');
const certs = generateCerts(names, 30);

describe('webhook certificates', () => {
  it('issues a serving certificate for the Service names, signed by the CA', () => {
    const ca = new X509Certificate(certs.caCert);
    const leaf = new X509Certificate(certs.tlsCert);
    expect(ca.ca).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(leaf.checkIssued(ca)).toBe(true);
    for (const n of names) expect(leaf.subjectAltName).toContain(`DNS:${n}`);
    expect(names).toEqual([
      'store-operator-webhook',
      'store-operator-webhook.store-system',
      'store-operator-webhook.store-system.svc',
      'store-operator-webhook.store-system.svc.cluster.local',
    ]);
  });

  it('rotates in the last third of the lifetime, when names change, or when unreadable', () => {
    const leaf = new X509Certificate(certs.tlsCert);
    const from = Date.parse(leaf.validFrom);
    const day = 86_400_000;
    expect(needsRotation(certs.tlsCert, from + day, names)).toBe(false);
    expect(needsRotation(certs.tlsCert, from + 19 * day, names)).toBe(false);
    expect(needsRotation(certs.tlsCert, from + 21 * day, names)).toBe(true);
    expect(needsRotation(certs.tlsCert, from - day, names)).toBe(true);
    expect(needsRotation(certs.tlsCert, from + day, [...names, 'other.svc'])).toBe(true);
    expect(needsRotation('garbage', from, names)).toBe(true);
    expect(needsRotation(undefined, from, names)).toBe(true);
  });
});

describe('WebhookServer', () => {
  const cluster = defaultStoreCluster({ apiVersion: 'store.kvcache.io/v1alpha1', kind: 'StoreCluster', metadata: { name: 'kv', namespace: 'ml' }, spec: {} });
  let server: WebhookServer;
  let port: number;
  beforeAll(async () => {
    server = new WebhookServer(
      { cert: certs.tlsCert, key: certs.tlsKey },
      () => cluster,
      () => {},
    );
    port = await server.listen(0, '127.0.0.1');
  });
  afterAll(() => server.close());

  function post(path: string, body: string): Promise<{ status: number; json: any }> {
    return new Promise((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port, path, method: 'POST', ca: certs.caCert, servername: names[2], headers: { 'Content-Type': 'application/json' } },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  it('answers an AdmissionReview v1 with a base64 JSON patch over TLS the CA verifies', async () => {
    const pod = { metadata: { name: 'p', annotations: { 'store.kvcache.io/inject': 'true' } }, spec: { containers: [{ name: 'c', image: 'i' }] } };
    const { status, json } = await post(
      '/mutate-pods',
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'abc', namespace: 'ml', operation: 'CREATE', object: pod } }),
    );
    expect(status).toBe(200);
    expect(json.apiVersion).toBe('admission.k8s.io/v1');
    expect(json.kind).toBe('AdmissionReview');
    expect(json.response).toMatchObject({ uid: 'abc', allowed: true, patchType: 'JSONPatch' });
    const ops = JSON.parse(Buffer.from(json.response.patch, 'base64').toString());
    expect(ops.map((o: any) => o.path)).toEqual(expect.arrayContaining(['/spec/initContainers', '/spec/volumes']));
  });

  it('rejects malformed bodies and unknown paths with clear errors', async () => {
    expect(await post('/mutate-pods', 'not json')).toEqual({ status: 400, json: { message: 'body is not JSON; expected an AdmissionReview v1' } });
    expect((await post('/mutate-pods', '{"kind":"Pod"}')).status).toBe(400);
    expect((await post('/elsewhere', '{}')).status).toBe(404);
    // a target Node's HTTP parser takes but the URL parser does not: 400, and the server lives on
    expect(await post('http://[', '{}')).toEqual({ status: 400, json: { message: 'malformed request target: not a URL path' } });
    expect((await post('/elsewhere', '{}')).status).toBe(404);
  });

  it('serves a swapped certificate to new connections', async () => {
    const next = generateCerts(names, 10);
    server.setCertificate({ cert: next.tlsCert, key: next.tlsKey });
    const fingerprint = await new Promise<string>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port, path: '/healthz', ca: next.caCert, servername: names[2], agent: false }, (res) => {
        resolve((res.socket as any).getPeerCertificate().fingerprint256);
        res.resume();
      });
      req.on('error', reject);
      req.end();
    });
    expect(fingerprint).toBe(new X509Certificate(next.tlsCert).fingerprint256);
  });
});
