// Self-managed webhook TLS: created once into a Secret with the caBundle set, reused while valid,
// rotated late in its life keeping the previous CA trusted, and a lost create race uses the winner.
import { X509Certificate } from 'node:crypto';
import { MemoryApi } from '../testing/memory-api.js';
import { WebhookTls } from './webhook-tls.js';

const opts = { namespace: 'store-system', secretName: 'op-webhook-tls', serviceName: 'op-webhook', webhookConfigName: 'op', validityDays: 30, log: () => {} };
const DAY = 86_400_000;

async function setup() {
  const api = new MemoryApi();
  await api.create({
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: 'op' },
    webhooks: [{ name: 'inject.store.kvcache.io', clientConfig: { service: { name: 'op-webhook', namespace: 'store-system' } } }],
  } as any);
  return api;
}
const bundleOf = async (api: MemoryApi) =>
  Buffer.from((await api.get<any>({ kind: 'MutatingWebhookConfiguration', name: 'op' }))!.webhooks[0].clientConfig.caBundle, 'base64').toString();

describe('WebhookTls', () => {
  it('creates the Secret and the caBundle, then reuses them while valid', async () => {
    const api = await setup();
    const tls = new WebhookTls(api, opts);
    const first = await tls.ensure(true);
    const secret = await api.get<any>({ kind: 'Secret', namespace: 'store-system', name: 'op-webhook-tls' });
    expect(secret.type).toBe('kubernetes.io/tls');
    expect(Buffer.from(secret.data['tls.crt'], 'base64').toString()).toBe(first.tlsCert);
    expect(await bundleOf(api)).toBe(first.caCert);
    expect(new X509Certificate(first.tlsCert).subjectAltName).toContain('DNS:op-webhook.store-system.svc');
    api.writes = [];
    expect(await tls.ensure(true)).toMatchObject({ tlsCert: first.tlsCert });
    expect(await new WebhookTls(api, opts).ensure(false)).toMatchObject({ tlsCert: first.tlsCert });
    expect(api.writes).toEqual([]);
  });

  it('rotates in the last third of the lifetime, keeping the old CA in the bundle', async () => {
    const api = await setup();
    const tls = new WebhookTls(api, opts);
    const first = await tls.ensure(true);
    const from = Date.parse(new X509Certificate(first.tlsCert).validFrom);
    expect(await tls.ensure(false, from + 25 * DAY)).toMatchObject({ tlsCert: first.tlsCert }); // followers never rotate
    const next = await tls.ensure(true, from + 25 * DAY);
    expect(next.tlsCert).not.toBe(first.tlsCert);
    expect(await bundleOf(api)).toBe(next.caCert + first.caCert);
    expect(new X509Certificate(next.tlsCert).checkIssued(new X509Certificate(next.caCert))).toBe(true);
  });

  it('uses the certificate another replica wrote first', async () => {
    const api = await setup();
    const a = new WebhookTls(api, opts);
    const b = new WebhookTls(api, opts);
    const [ca, cb] = await Promise.all([a.ensure(true), b.ensure(true)]);
    const stored = await api.get<any>({ kind: 'Secret', namespace: 'store-system', name: 'op-webhook-tls' });
    const storedCert = Buffer.from(stored.data['tls.crt'], 'base64').toString();
    expect([ca.tlsCert, cb.tlsCert]).toEqual([storedCert, storedCert]);
  });
});
