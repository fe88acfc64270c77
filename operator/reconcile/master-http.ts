// A GET of one of the master's HTTP endpoints with a deadline; failures name the URL and the
// reason (fetch itself says only "fetch failed": the cause holds ECONNREFUSED, ENOTFOUND, ...).
export async function getFromMaster(url: string, timeoutMs = 5000): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    const cause = (e as Error & { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`GET ${url}: ${cause?.code ?? cause?.message ?? (e as Error).message}`);
  }
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return res;
}
