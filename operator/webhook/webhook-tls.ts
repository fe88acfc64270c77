// Keeps the webhook's self-managed TLS material in a Secret and the CA in the
// MutatingWebhookConfiguration's caBundle: creates it when missing, replaces it when
// needsRotation says so (the previous CA stays in the bundle, so replicas still serving the old
// certificate keep being trusted until they reload), and lets every replica read the current one.
import type { KubeApi } from '../reconcile/kube-client.js';
import { KubeApiError } from '../reconcile/kube-client.js';
import { generateCerts, needsRotation, serviceDnsNames, type WebhookCerts } from './certs.js';

export interface WebhookTlsOptions {
  namespace: string;
  secretName: string;
  serviceName: string;
  webhookConfigName: string;
  validityDays: number;
  log: (m: string) => void;
}

interface Secret {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  type?: string;
  data?: Record<string, string>;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const unb64 = (s: string | undefined) => (s ? Buffer.from(s, 'base64').toString('utf8') : undefined);

function fromSecret(s: Secret | undefined): (WebhookCerts & { bundle: string }) | undefined {
  const tlsCert = unb64(s?.data?.['tls.crt']);
  const tlsKey = unb64(s?.data?.['tls.key']);
  const caCert = unb64(s?.data?.['ca.crt']);
  if (!tlsCert || !tlsKey || !caCert) return undefined;
  return { tlsCert, tlsKey, caCert, bundle: unb64(s?.data?.['ca-bundle.crt']) ?? caCert };
}

export class WebhookTls {
  constructor(
    private readonly api: KubeApi,
    private readonly o: WebhookTlsOptions,
  ) {}

  private get dnsNames(): string[] {
    return serviceDnsNames(this.o.serviceName, this.o.namespace);
  }

  /** The current certificate; creates or rotates it first when `manage` (the leader, or at startup). */
  async ensure(manage: boolean, nowMs = Date.now()): Promise<WebhookCerts> {
    const ref = { kind: 'Secret', namespace: this.o.namespace, name: this.o.secretName };
    const secret = await this.api.get<Secret>(ref);
    const current = fromSecret(secret);
    if (current && (!manage || !needsRotation(current.tlsCert, nowMs, this.dnsNames))) {
      if (manage) await this.patchCaBundle(current.bundle);
      return current;
    }
    if (!manage && current) return current;
    const fresh = generateCerts(this.dnsNames, this.o.validityDays);
    const bundle = current ? `${fresh.caCert}${current.caCert}` : fresh.caCert;
    const data = { 'tls.crt': b64(fresh.tlsCert), 'tls.key': b64(fresh.tlsKey), 'ca.crt': b64(fresh.caCert), 'ca-bundle.crt': b64(bundle) };
    try {
      if (secret) await this.api.replace<Secret>({ ...secret, type: 'kubernetes.io/tls', data });
      else await this.api.create<Secret>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: this.o.secretName, namespace: this.o.namespace }, type: 'kubernetes.io/tls', data });
    } catch (e) {
      // Another replica wrote it first: use theirs.
      if (e instanceof KubeApiError && e.conflict) {
        const winner = fromSecret(await this.api.get<Secret>(ref));
        if (winner) return winner;
      }
      throw e;
    }
    this.o.log(`webhook certificate ${current ? 'rotated' : 'created'} in Secret ${this.o.namespace}/${this.o.secretName}`);
    await this.patchCaBundle(bundle);
    return fresh;
  }

  private async patchCaBundle(bundle: string): Promise<void> {
    const ref = { kind: 'MutatingWebhookConfiguration', name: this.o.webhookConfigName };
    const cfg = await this.api.get<{ metadata?: { name?: string }; webhooks?: { name: string; clientConfig?: { caBundle?: string } }[] }>(ref);
    if (!cfg) {
      this.o.log(`MutatingWebhookConfiguration ${this.o.webhookConfigName} not found; caBundle not set (is the chart installed?)`);
      return;
    }
    const caBundle = b64(bundle);
    if ((cfg.webhooks ?? []).every((w) => w.clientConfig?.caBundle === caBundle)) return;
    const webhooks = (cfg.webhooks ?? []).map((w) => ({ ...w, clientConfig: { ...w.clientConfig, caBundle } }));
    await this.api.mergePatch(ref, { webhooks });
  }
}
