// Raw bytes to an HTTP server, for requests no HTTP client library would send.
import { connect } from 'node:net';

/** Sends `request` as is to host:port; resolves with the status line of the answer. */
export function rawHttpStatus(host: string, port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const sock = connect(port, host, () => sock.write(request));
    sock.on('data', (d: Buffer) => (got += d.toString('latin1')));
    sock.on('end', () => resolve(got.split('\r\n')[0]));
    sock.on('error', reject);
  });
}

/** A request line whose target Node's HTTP parser accepts and the URL parser rejects. */
export const MALFORMED_TARGET_REQUEST = 'GET http://[ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
