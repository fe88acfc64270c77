// The webhook's HTTPS server: POST /mutate-pods takes an AdmissionReview v1 and answers with the
// review (JSON patch or denial); GET /healthz for probes. The TLS context can be swapped at run
// time, so a rotated certificate takes effect without a restart.
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { review, type AdmissionReview, type ClusterLookup } from './admission.js';
import { MALFORMED_TARGET, requestUrl } from '../../common/request-url.js';

const MAX_BODY = 8 * 2 ** 20;

export class WebhookServer {
  private server: https.Server;

  constructor(
    tls: { cert: string; key: string },
    private readonly lookup: ClusterLookup,
    private readonly log: (m: string) => void,
  ) {
    this.server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => this.handle(req, res));
  }

  setCertificate(tls: { cert: string; key: string }): void {
    this.server.setSecureContext({ cert: tls.cert, key: tls.key });
  }

  listen(port: number, host = '0.0.0.0'): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve((this.server.address() as AddressInfo).port));
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void {
    const reply = (code: number, body: unknown) => {
      res.writeHead(code, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const url = requestUrl(req);
    if (url === null) return reply(400, { message: MALFORMED_TARGET.trim() });
    if (req.method === 'GET' && url.pathname === '/healthz') return reply(200, { status: 'ok' });
    if (url.pathname !== '/mutate-pods') return reply(404, { message: `no handler for ${url.pathname}; the webhook serves POST /mutate-pods` });
    if (req.method !== 'POST') return reply(405, { message: 'use POST with an AdmissionReview' });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reply(413, { message: 'AdmissionReview too large' });
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      if (res.headersSent) return;
      let input: AdmissionReview;
      try {
        input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return reply(400, { message: 'body is not JSON; expected an AdmissionReview v1' });
      }
      if (input?.kind !== 'AdmissionReview' || !input.request) return reply(400, { message: 'expected an AdmissionReview with a request' });
      try {
        const out = review(input, this.lookup);
        if (out.response && !out.response.allowed)
          this.log(`denied ${input.request.namespace}/${(input.request.object as any)?.metadata?.name ?? ''}: ${out.response.status?.message}`);
        reply(200, out);
      } catch (e) {
        this.log(`webhook: ${(e as Error).stack}`);
        reply(500, { message: (e as Error).message });
      }
    });
  }
}
