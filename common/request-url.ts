// The URL of an incoming HTTP request. Node's HTTP parser accepts request targets that the URL
// parser rejects (an absolute-form target such as `http://[`), and `new URL` throws on them: in a
// request handler that is an uncaught exception that ends the process. Servers here parse the
// target with this and answer 400 when it is null.
import type { IncomingMessage } from 'node:http';

/** The request's URL (path and query; the host part is a placeholder), or null when it does not parse. */
export function requestUrl(req: IncomingMessage): URL | null {
  try {
    return new URL(req.url ?? '/', 'http://localhost');
  } catch {
    return null;
  }
}

export const MALFORMED_TARGET = 'malformed request target: not a URL path\n';
