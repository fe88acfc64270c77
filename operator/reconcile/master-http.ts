// A GET of one of the master's HTTP endpoints with a deadline; failures name the URL and the
// reason (fetch itself says only "fetch failed": the cause holds ECONNREFUSED, ENOTFOUND, ...).
// With `tls` (the cluster's spec.tls Secret) over HTTPS, verified against its CA.
import { controlFetch } from '../../common/tls-fetch.js';
import type { TlsMaterial } from '../../common/tls-material.js';

export async function getFromMaster(url: string, timeoutMs = 5000, tls?: TlsMaterial): Promise<Response> {
  let res: Response;
  try {
    res = await controlFetch(url, { signal: AbortSignal.timeout(timeoutMs) }, tls);
  } catch (e) {
    const cause = (e as Error & { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`GET ${url}: ${cause?.code ?? cause?.message ?? (e as Error).message}`);
  }
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return res;
}
